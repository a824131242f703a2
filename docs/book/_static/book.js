// A figure in a notebook's output opens at full size on click (a data: image cannot open in a tab
// of its own): an overlay shows it at its native resolution, scrolling when it is larger than the
// window; a click or Escape closes it.
document.addEventListener("DOMContentLoaded", () => {
  const close = () => document.querySelectorAll(".dlgn-lightbox").forEach((box) => box.remove());
  document.addEventListener("keydown", (event) => { if (event.key === "Escape") close(); });
  document.querySelectorAll(".cell_output img, .dlgn-twin img").forEach((img) => {
    img.classList.add("dlgn-zoomable");
    img.title = "open at full size";
    img.addEventListener("click", () => {
      const box = document.createElement("div");
      box.className = "dlgn-lightbox";
      const big = document.createElement("img");
      big.src = img.currentSrc || img.src;
      big.alt = img.alt;
      box.appendChild(big);
      box.addEventListener("click", close);
      document.body.appendChild(box);
    });
  });
});
