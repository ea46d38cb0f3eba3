// Progressive enhancement only: every page works without this file.
// Copy buttons appear where the clipboard can be used.
document.addEventListener("DOMContentLoaded", function () {
  // The listing form takes a card URL or a pasted card: whichever source
  // is chosen is required, so the browser asks for it before sending.
  var byURL = document.getElementById("source-url"), byPaste = document.getElementById("source-paste");
  var cardURL = document.getElementById("card_url"), card = document.getElementById("card");
  if (byURL && byPaste && cardURL && card) {
    var pick = function () { cardURL.required = byURL.checked; card.required = byPaste.checked; };
    byURL.addEventListener("change", pick);
    byPaste.addEventListener("change", pick);
    pick();
  }
  if (!navigator.clipboard) return;
  document.querySelectorAll("button.copy[data-copy]").forEach(function (btn) {
    btn.hidden = false;
    btn.addEventListener("click", function () {
      var el = document.getElementById(btn.getAttribute("data-copy"));
      if (!el) return;
      navigator.clipboard.writeText(el.textContent.trim()).then(function () {
        btn.textContent = "Copied";
        setTimeout(function () { btn.textContent = "Copy"; }, 2000);
      });
    });
  });
  var summary = document.getElementById("error-summary");
  if (summary) summary.focus();
});
