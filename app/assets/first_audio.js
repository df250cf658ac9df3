// Time to first audio as the user hears it, measured in this page: from the click on Generate to the
// moment the result player starts playing. The figure goes back to the app through a hidden box; the app
// shows it beside the engine's own figure and records both in the history.
(() => {
  for (const panel of ["clone", "design"]) {
    let clickedAt = null;
    document.addEventListener("click", (event) => {
      const button = event.target.closest && event.target.closest(`#${panel}-generate`);
      if (button && !button.disabled) clickedAt = performance.now();
    }, true);
    document.addEventListener("playing", (event) => {  // media events do not bubble: listen while capturing
      if (clickedAt === null || !event.target.closest || !event.target.closest(`#${panel}-result`)) return;
      const heardMs = Math.round(performance.now() - clickedAt);
      clickedAt = null;
      const box = document.querySelector(`#${panel}-heard textarea, #${panel}-heard input`);
      if (!box) return;
      box.value = String(heardMs);
      box.dispatchEvent(new Event("input", { bubbles: true }));
    }, true);
  }
})();
