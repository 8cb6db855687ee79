// Talking to the JSON API: the bearer token (asked for once, kept for the tab in
// sessionStorage), problem documents as errors, and which answer is still the newest.
"use strict";

const TOKEN_KEY = "affect-memory-token";

class ApiError extends Error {
  constructor(status, detail, field) {
    super(`${status}: ${detail}`);
    this.status = status;
    this.field = field;
  }
}

// Ask for the bearer token in the dialog; resolves once one is stored, rejects on cancel.
function askToken(reason) {
  const dialog = byTestId("token-dialog");
  const input = byTestId("token-input");
  byTestId("token-reason").textContent = reason;
  input.value = "";
  return new Promise((resolve, reject) => {
    const form = byTestId("token-form");
    const cancel = byTestId("token-cancel");
    const finish = () => {
      form.removeEventListener("submit", onSubmit);
      cancel.removeEventListener("click", onCancel);
      dialog.removeEventListener("cancel", onCancel);
      input.value = "";
      dialog.close();
    };
    const onSubmit = (event) => {
      event.preventDefault();
      if (!input.value) return;
      sessionStorage.setItem(TOKEN_KEY, input.value);
      finish();
      resolve();
    };
    const onCancel = () => {
      finish();
      reject(new ApiError(401, "no token given; this server needs one"));
    };
    form.addEventListener("submit", onSubmit);
    cancel.addEventListener("click", onCancel);
    dialog.addEventListener("cancel", onCancel); // Escape
    dialog.showModal();
    input.focus();
  });
}

let tokenRequest = null; // one dialog for all requests that met a 401 at once

async function api(path, options = {}) {
  const headers = new Headers(options.headers || {});
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.set("Authorization", `Bearer ${token}`);
  if (options.body !== undefined) headers.set("Content-Type", "application/json");
  const response = await fetch(path, { ...options, headers });
  if (response.status === 401) {
    if (tokenRequest === null) {
      const reason = token
        ? "The server refused the stored token. Enter the right one."
        : "This server asks for a bearer token. It is kept for this tab only.";
      if (token) sessionStorage.removeItem(TOKEN_KEY);
      tokenRequest = askToken(reason).finally(() => {
        tokenRequest = null;
      });
    }
    await tokenRequest;
    return api(path, options);
  }
  if (!response.ok) {
    let problem = null;
    try {
      problem = await response.json();
    } catch {
      problem = null;
    }
    const detail = problem && problem.detail ? problem.detail : response.statusText;
    throw new ApiError(response.status, detail, problem ? problem.field : undefined);
  }
  return response;
}

async function apiJson(path, options) {
  return (await api(path, options)).json();
}

const newest = {};

// Start a request of one kind; the returned check says whether it is still the newest of its
// kind, so the answer of an older, slower request (a user picked before) is dropped.
function newRequest(kind) {
  newest[kind] = (newest[kind] ?? 0) + 1;
  const mine = newest[kind];
  return () => newest[kind] === mine;
}
