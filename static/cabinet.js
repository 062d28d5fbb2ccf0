// The cabinet's little scripts: resend countdowns and copy buttons. Pages work without them.
"use strict";

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
      await navigator.clipboard.writeText(source.textContent.trim());
      button.textContent = button.dataset.copiedLabel;
    });
  }
});
