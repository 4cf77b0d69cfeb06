// The tuning grid's block answers 400 with the reason when a grid is refused (a size out of
// bounds, an unknown setting): swap it in all the same, so the reason shows where the grid would.
document.addEventListener("htmx:beforeSwap", (event) => {
  const target = event.detail.target;
  if (event.detail.xhr.status === 400 && target && target.id === "grid-status") {
    event.detail.shouldSwap = true;
    event.detail.isError = false;
  }
});
