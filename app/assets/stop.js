// Stop is shown only while there is something to stop (a generation under way or its sound playing), and it
// silences the player too: cancelling the generation alone would let the audio already buffered play on.
(() => {
  const UNDER_WAY = /^(Preparing|Waiting|Generating|Stopping)/;
  for (const panel of ["clone", "design"]) {
    let clickedAt = -Infinity, stoppedAt = -Infinity;
    const find = (what) => document.querySelector(`#${panel}-${what}`);
    const players = () => document.querySelectorAll(`#${panel}-result audio`);
    const show = () => {
      const stop = find("stop"), status = find("status");
      if (!stop) return;
      const underWay = performance.now() - clickedAt < 3000 || (status && UNDER_WAY.test(status.innerText.trim()));
      const playing = [...players()].some((a) => !a.paused && !a.ended);
      stop.classList.toggle("vd-active", underWay || playing);  // hidden by style.css until then
    };
    document.addEventListener("click", (event) => {
      if (!event.target.closest) return;
      if (event.target.closest(`#${panel}-generate`)) [clickedAt, stoppedAt] = [performance.now(), -Infinity];
      if (event.target.closest(`#${panel}-stop`)) {
        stoppedAt = performance.now();
        clickedAt = -Infinity;
        players().forEach((a) => a.pause());
      }
      show();
    }, true);
    document.addEventListener("playing", (event) => {  // a chunk still in flight must not restart the sound
      if (performance.now() - stoppedAt < 5000 && event.target.closest && event.target.closest(`#${panel}-result`)) {
        event.target.pause();
      }
    }, true);
    setInterval(show, 250);
  }
})();
