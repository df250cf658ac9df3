// The accordions marked vd-shut (app/ui/components.shut_accordion) are built open, so that Gradio renders their fields
// with the page, and are shut here the moment they appear, before they are painted. Gradio renders the fields of an
// accordion built shut only when it is first opened, then, one animation frame after they have settled, sets them
// again to the values the page was served with, over whatever was typed into them meanwhile (Gradio 6.31,
// render_previously_invisible_children): up to 1.3 s after they appeared, here.
(() => {
  const shut = new WeakSet();  // those shut once: then the user's to open
  new MutationObserver(() => {
    for (const accordion of document.querySelectorAll(".vd-shut")) {
      if (shut.has(accordion)) continue;
      const toggle = accordion.querySelector("button.label-wrap");
      // pressed until it shuts: a press before Gradio listens is lost; the class "open" comes after the button
      if (toggle?.classList.contains("open")) {
        toggle.dataset.vdPressed = "1";
        toggle.click();
      } else if (toggle?.dataset.vdPressed) shut.add(accordion);
    }
  }).observe(document.documentElement, {childList: true, subtree: true, attributes: true, attributeFilter: ["class"]});
})();
