// Typing in a language list replaces what it shows (say "Auto") instead of being added after it: the shown
// value is selected when the box gets the focus.
document.addEventListener("focusin", (event) => {
  const box = event.target;
  if (box.matches && box.matches("#clone-language input, #design-language input")) box.select();
});
