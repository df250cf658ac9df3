// The accordions marked vd-shut (app/ui/components.shut_accordion) are built open, so that Gradio renders their fields
// with the page (or their tab), and are shut here whenever they show open until the user opens or shuts one.
// Gradio renders the fields of an accordion built shut only when it is first opened, then, one animation frame after
// they have settled, sets them again to the values the page was served with, over whatever was typed into them
// meanwhile (Gradio 6.31, render_previously_invisible_children): up to 1.3 s after they appeared, here. The same
// step opens again an accordion of a tab shown for the first time, as it was built.
(() => {
  const touched = new WeakSet();  // the accordions the user opened or shut: theirs from then on
  const toggleOf = (accordion) => accordion.querySelector("button.label-wrap");
  document.addEventListener("click", (event) => {
    const accordion = event.isTrusted ? event.target.closest?.(".vd-shut") : null;
    if (accordion && event.target.closest("button.label-wrap") === toggleOf(accordion)) touched.add(accordion);
  }, true);
  new MutationObserver(() => {
    for (const accordion of document.querySelectorAll(".vd-shut")) {
      const toggle = touched.has(accordion) ? null : toggleOf(accordion);
      if (toggle?.classList.contains("open")) toggle.click();  // its class "open" comes after the button
    }
  }).observe(document.documentElement, {childList: true, subtree: true, attributes: true, attributeFilter: ["class"]});
})();
