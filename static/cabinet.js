// The cabinet's little scripts: resend countdowns, copy and download buttons. Pages work without
// them: a button that needs a script is `hidden` in the page and shown here once it works.
"use strict";

// What a copy or download button takes from its source: a list's items one per line (recovery
// codes), else the element's text (a password, a key).
const textOf = (source) => {
  const items = source.querySelectorAll("li");
  if (items.length) return Array.from(items, (item) => item.textContent.trim()).join("\n");
  return source.textContent.trim();
};

document.addEventListener("DOMContentLoaded", () => {
  for (const button of document.querySelectorAll("button[data-retry-after]")) {
    let seconds = Number(button.dataset.retryAfter) || 0;
    const tick = () => {
      if (seconds <= 0) {
        button.disabled = false;
        button.textContent = button.dataset.label;
        return;
      }
      button.disabled = true;
      button.textContent = button.dataset.waitLabel.replace("%s", String(seconds));
      seconds -= 1;
      window.setTimeout(tick, 1000);
    };
    tick();
  }
  for (const button of document.querySelectorAll("button[data-copy]")) {
    button.addEventListener("click", async () => {
      const source = document.querySelector(button.dataset.copy);
      if (!source) return;
      await navigator.clipboard.writeText(textOf(source));
      button.textContent = button.dataset.copiedLabel;
    });
    button.hidden = false;
  }
  // A text file made here from the page's own text: nothing is fetched again (the codes are shown
  // once, and the page is not cached).
  for (const button of document.querySelectorAll("button[data-download]")) {
    button.addEventListener("click", () => {
      const source = document.querySelector(button.dataset.download);
      if (!source) return;
      const file = new Blob([`${textOf(source)}\n`], { type: "text/plain;charset=utf-8" });
      const link = document.createElement("a");
      link.href = URL.createObjectURL(file);
      link.download = button.dataset.filename;
      document.body.append(link);
      link.click();
      link.remove();
      window.setTimeout(() => URL.revokeObjectURL(link.href), 60000);
    });
    button.hidden = false;
  }
});
