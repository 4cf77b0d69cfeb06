/* Message content: a thumbnail opens its picture full size in a dialog (closed by a click on
 * the picture, the Close button or Escape). The picture is a data: URL already on the page,
 * so nothing is fetched. */
(function () {
  "use strict";

  function viewer() {
    var d = document.getElementById("image-viewer");
    if (d) return d;
    d = document.createElement("dialog");
    d.id = "image-viewer";
    d.className = "image-viewer";
    d.setAttribute("aria-label", "Image");
    var article = document.createElement("article");
    var img = document.createElement("img");
    img.alt = "";
    var close = document.createElement("button");
    close.type = "button";
    close.className = "secondary";
    close.textContent = "Close";
    close.setAttribute("data-image-close", "");
    img.setAttribute("data-image-close", "");
    article.appendChild(img);
    article.appendChild(close);
    d.appendChild(article);
    document.body.appendChild(d);
    return d;
  }

  document.addEventListener("click", function (e) {
    var open = e.target.closest("[data-image-open]");
    if (open) {
      var thumb = open.querySelector("img");
      if (!thumb) return;
      var d = viewer(), img = d.querySelector("img");
      img.src = thumb.src;
      img.alt = thumb.alt;
      d.showModal();
      return;
    }
    if (e.target.closest("[data-image-close]")) {
      var v = document.getElementById("image-viewer");
      if (v && v.open) v.close();
    }
  });
})();
