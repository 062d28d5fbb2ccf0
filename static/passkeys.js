// Passkeys (WebAuthn): adding one on the Security page, signing in with one on the sign-in page
// and answering the second step of a sign-in with one.
// A form marked data-passkey="create" or "get" carries the address of its options and the
// sentences to show, in the page's language. The script fetches the options, asks the browser
// for the credential, and posts its JSON with the form: the server's page says what came of it.
// A form whose passkey is one way among others marks its passkey button (data-passkey-button):
// only that button runs the ceremony, and without WebAuthn only it is hidden (the account's
// deletion, where the password goes with the passkey's answer or a code).
"use strict";

(() => {
  const supported =
    typeof window.PublicKeyCredential === "function" &&
    typeof PublicKeyCredential.parseCreationOptionsFromJSON === "function";

  // A sentence the server sent instead of the options (too many attempts).
  class Refusal extends Error {}

  const say = (form, sentence) => {
    const line = form.querySelector("[data-passkey-error]");
    line.textContent = sentence;
    line.hidden = !sentence;
  };

  const sentence = (form, error) => {
    if (error instanceof Refusal) return error.message;
    if (error.name === "NotAllowedError" || error.name === "AbortError") {
      return form.dataset.cancelled;
    }
    if (error.name === "InvalidStateError" && form.dataset.exists) return form.dataset.exists;
    return form.dataset.failed;
  };

  const ceremonyOptions = async (form) => {
    const response = await fetch(form.dataset.options, {
      method: "POST",
      credentials: "same-origin",
      headers: {
        Accept: "application/json",
        "X-CSRFToken": form.elements.csrfmiddlewaretoken.value,
      },
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok || !body.options) throw new Refusal(body.error || form.dataset.failed);
    return body;
  };

  const credentialFor = (form, options) => {
    if (form.dataset.passkey === "create") {
      const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(options);
      return navigator.credentials.create({ publicKey });
    }
    const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(options);
    return navigator.credentials.get({ publicKey });
  };

  const run = async (form, button) => {
    button.disabled = true;
    say(form, "");
    try {
      const ceremony = await ceremonyOptions(form);
      const credential = await credentialFor(form, ceremony.options);
      form.elements.requestId.value = ceremony.requestId;
      form.elements.credential.value = JSON.stringify(credential.toJSON());
      form.submit(); // no submit event: this handler does not run again
    } catch (error) {
      say(form, sentence(form, error));
      button.disabled = false;
    }
  };

  document.addEventListener("DOMContentLoaded", () => {
    for (const notice of document.querySelectorAll("[data-passkeys-unsupported]")) {
      notice.hidden = supported;
    }
    for (const form of document.querySelectorAll("form[data-passkey]")) {
      const own = form.querySelector("button[data-passkey-button]");
      (own || form).hidden = !supported;
      form.addEventListener("submit", (event) => {
        if (own && event.submitter !== own) return; // another way: the form posts as it is
        event.preventDefault();
        run(form, own || form.querySelector("button[type=submit]"));
      });
    }
  });
})();
