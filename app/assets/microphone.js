// Says when there is nothing to record with (no microphone, or a page address where the browser refuses
// the microphone), instead of leaving a Record button that cannot work.
(() => {
  const say = (text) => {
    const note = document.querySelector("#vd-mic-note");
    note.textContent = text;
    note.hidden = false;
  };
  const check = async () => {
    if (!navigator.mediaDevices || !navigator.mediaDevices.enumerateDevices) {
      say("This browser allows the microphone only on http://127.0.0.1 or localhost: upload a clip instead.");
    } else if (!(await navigator.mediaDevices.enumerateDevices()).some((d) => d.kind === "audioinput")) {
      say("No microphone found: plug one in and reload the page, or upload a clip instead.");
    }
    document.querySelector("#vd-mic-note").dataset.checked = "yes";
  };
  const built = setInterval(() => {  // the note is built by Gradio after this script runs
    if (document.querySelector("#vd-mic-note")) {
      clearInterval(built);
      check();
    }
  }, 200);
})();
