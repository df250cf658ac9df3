// Stop is shown only while there is something to stop (a generation under way or its sound playing), and it
// silences the sound at once (live_player.js; the finished result's player too): cancelling the generation alone
// would let the audio already received play on.
(() => {
  const UNDER_WAY = /^(Preparing|Waiting|Generating|Stopping)/;
  for (const panel of ["clone", "design"]) {
    let clickedAt = -Infinity;
    const find = (what) => document.querySelector(`#${panel}-${what}`);
    const players = () => document.querySelectorAll(`#${panel}-result audio`);
    const show = () => {
      const stop = find("stop"), status = find("status");
      if (!stop) return;
      const underWay = performance.now() - clickedAt < 3000 || (status && UNDER_WAY.test(status.innerText.trim()));
      const playing = window.voicedeskLive.isPlaying(panel) || [...players()].some((a) => !a.paused && !a.ended);
      stop.classList.toggle("vd-active", underWay || playing);  // hidden by style.css until then
    };
    document.addEventListener("click", (event) => {
      if (!event.target.closest) return;
      if (event.target.closest(`#${panel}-generate`)) clickedAt = performance.now();
      if (event.target.closest(`#${panel}-stop`)) {
        clickedAt = -Infinity;
        if (window.voicedeskLive.isPlaying(panel)) window.voicedeskLive.stop();
        players().forEach((a) => a.pause());
      }
      show();
    }, true);
    setInterval(show, 250);
  }
  document.addEventListener("click", (event) => { // the Studio's Stop is always shown
    if (event.target.closest && event.target.closest("#studio-stop") && window.voicedeskLive.isPlaying("studio")) {
      window.voicedeskLive.stop();
    }
  }, true);
})();
