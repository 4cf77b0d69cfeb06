/* Copy buttons: <button data-copy="ID"> copies the value of the input with that id (the API
 * key shown once after it is created), then says so on the button. */
(function () {
  "use strict";
  document.addEventListener("click", function (e) {
    var btn = e.target.closest("button[data-copy]");
    if (!btn) return;
    var field = document.getElementById(btn.getAttribute("data-copy"));
    if (!field) return;
    field.select();
    var done = function () { btn.textContent = "Copied"; };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(field.value).then(done, function () { document.execCommand("copy"); done(); });
    } else {
      document.execCommand("copy");
      done();
    }
  });
})();
