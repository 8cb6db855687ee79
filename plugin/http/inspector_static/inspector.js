// The memory inspector's views: users, memories, recall, conversations, export and erase.
// It is a client of the JSON API (/v1/...) and nothing else (api.js); memories, conversations
// and ids are untrusted text, put on the page only by dom.js's helpers.
"use strict";

const view = { user: null, offset: 0, limit: 10, q: "" };

function userPath(...parts) {
  return ["v1/users", view.user, ...parts].map((part, i) => (i ? encodeURIComponent(part) : part)).join("/");
}

// ---- status and errors -----------------------------------------------------------------------

function setStatus(text) {
  byTestId("status").textContent = text;
}

function showError(error) {
  const banner = byTestId("error");
  if (error === null) {
    banner.hidden = true;
    banner.textContent = "";
    return;
  }
  banner.textContent = error.message;
  banner.hidden = false;
}

// Run an action, showing its failure in the error banner instead of losing it.
async function guarded(action) {
  showError(null);
  try {
    await action();
  } catch (error) {
    showError(error);
    setStatus("");
  }
}

// ---- users and tabs --------------------------------------------------------------------------

async function loadUsers() {
  setStatus("loading users…");
  const current = newRequest("users");
  const answer = await apiJson("v1/users");
  if (!current()) return;
  const select = byTestId("user-select");
  select.replaceChildren();
  for (const user of answer.users) {
    select.append(element("option", { value: user.user_id }, `${user.user_id} (${user.memories})`));
  }
  const ids = answer.users.map((user) => user.user_id);
  const keep = ids.includes(view.user) ? view.user : ids.length ? ids[0] : null;
  select.value = keep === null ? "" : keep;
  setStatus(`${ids.length} user${ids.length === 1 ? "" : "s"}`);
  await selectUser(keep);
}

async function selectUser(user) {
  view.user = user;
  view.offset = 0;
  byTestId("manage-user").textContent = user === null ? "(no user)" : user;
  byTestId("recall-answer").hidden = true;
  byTestId("conversation-view").hidden = true;
  byTestId("erase-report").hidden = true;
  // nothing of the previous user stays on screen while the new user's answers load
  byTestId("memories-body").replaceChildren();
  byTestId("conversation-list").replaceChildren();
  delete byTestId("memories-body").dataset.user;
  delete byTestId("conversation-list").dataset.user;
  byTestId("memories-range").textContent = user === null ? "no users" : "loading…";
  if (user === null) return;
  await Promise.all([loadMemories(), loadConversations()]);
}

function showView(name) {
  for (const tab of document.querySelectorAll('[role="tab"]')) {
    tab.setAttribute("aria-selected", String(tab.dataset.view === name));
  }
  for (const section of document.querySelectorAll("section.view")) {
    section.hidden = section.dataset.view !== name;
  }
}

// ---- memories --------------------------------------------------------------------------------

async function loadMemories() {
  const query = new URLSearchParams({ offset: String(view.offset), limit: String(view.limit) });
  if (view.q) query.set("q", view.q);
  const current = newRequest("memories");
  const answer = await apiJson(`${userPath("memories")}?${query}`);
  if (!current()) return;
  const body = byTestId("memories-body");
  body.replaceChildren();
  body.dataset.user = view.user; // whose page this is: tests wait on it
  for (const memory of answer.memories) {
    const row = element("tr", { "data-testid": "memory-row", "data-id": memory.id });
    row.append(
      element("td", { "data-testid": "memory-text", class: "text" }, memory.text),
      element("td", { "data-testid": "memory-timestamp" }, memory.timestamp ?? "—"),
      element("td", { "data-testid": "memory-significance", class: "num" }, formatNumber(memory.significance)),
      element("td", { "data-testid": "memory-valence", class: "num" }, formatNumber(memory.valence)),
      element("td", { "data-testid": "memory-recall-count", class: "num" }, String(memory.recall_count)),
    );
    body.append(row);
  }
  const shown = answer.memories.length;
  byTestId("memories-range").textContent = answer.total
    ? `${answer.offset + 1}–${answer.offset + shown} of ${answer.total}`
    : view.q ? "no memory contains that text" : "no memories";
  byTestId("memories-prev").disabled = answer.offset === 0;
  byTestId("memories-next").disabled = answer.offset + shown >= answer.total;
}

// ---- recall ----------------------------------------------------------------------------------

// "2026-03-01T12:00" from a datetime-local input, as ISO 8601 with the browser's own offset.
function zonedTime(local) {
  const withSeconds = local.length === 16 ? `${local}:00` : local;
  const minutes = -new Date(withSeconds).getTimezoneOffset();
  const sign = minutes < 0 ? "-" : "+";
  const hours = String(Math.floor(Math.abs(minutes) / 60)).padStart(2, "0");
  const rest = String(Math.abs(minutes) % 60).padStart(2, "0");
  return `${withSeconds}${sign}${hours}:${rest}`;
}

function recallRequest() {
  const request = {
    query: byTestId("recall-query").value,
    top_k: Number(byTestId("recall-top-k").value),
    mood_valence: Number(byTestId("recall-mood").value),
  };
  const now = byTestId("recall-now").value;
  if (now) request.now = zonedTime(now);
  return request;
}

async function runRecall() {
  setStatus("recalling…");
  const request = recallRequest();
  const current = newRequest("recall");
  const answer = await apiJson(userPath("recall"), { method: "POST", body: JSON.stringify(request) });
  if (!current()) return;
  const hits = answer.hits ?? answer.results;
  renderPlan(answer.plan);
  renderHits(hits);
  byTestId("recall-answer").hidden = false;
  setStatus(`${hits.length} hit${hits.length === 1 ? "" : "s"} for “${answer.query}”`);
}

function renderPlan(plan) {
  const list = byTestId("recall-plan");
  list.replaceChildren();
  if (plan === null || plan === undefined) {
    list.append(element("dt", {}, "plan"), element("dd", {}, "none (dense recall)"));
    return;
  }
  for (const [key, value] of Object.entries(plan)) {
    list.append(
      element("dt", {}, key),
      element("dd", { "data-testid": "plan-field", "data-key": key }, formatValue(value, key === "period" ? " → " : ", ")),
    );
  }
}

// What the page draws of a hit: its features, what its relevance was made of, the weights of
// those parts, and the sentence explaining it. A hit that names "features", "weights" and
// "explanation" is drawn as it says; the store's own hit JSON (what recall --json prints) has
// the score's factors, the relevance's parts and weights, and the time rule in their place.
const SCORE_FACTORS = ["similarity", "recency", "salience", "episode", "congruence"];

function hitView(hit) {
  const relevance = hit.relevance ?? {};
  const parts = Object.entries(relevance).filter(([, value]) => typeof value === "number");
  return {
    features: Object.entries(hit.features ?? Object.fromEntries(SCORE_FACTORS.filter((name) => name in hit).map((name) => [name, hit[name]]))),
    relevance: parts,
    weights: Object.entries(hit.weights ?? relevance.weights ?? {}),
    explanation: hit.explanation ?? hit.time_rule ?? "",
  };
}

function renderHits(hits) {
  const list = byTestId("recall-hits");
  list.replaceChildren();
  if (!hits.length) {
    list.append(element("li", { class: "empty" }, "no memories matched"));
    return;
  }
  hits.forEach((hit, index) => {
    const item = element("li", { "data-testid": "hit", "data-id": hit.id, class: "hit" });
    const header = element(
      "div",
      { class: "hit-header" },
      element("span", { class: "rank" }, `#${index + 1}`),
      element("span", { "data-testid": "hit-score", "data-value": String(hit.score), class: "score" }, formatNumber(hit.score, 4)),
      element("span", { "data-testid": "hit-timestamp", class: "when" }, hit.timestamp ?? "—"),
      element("code", { "data-testid": "hit-id", class: "id" }, hit.id),
    );
    const shown = hitView(hit);
    const charts = element(
      "div",
      { class: "charts" },
      element("figure", {}, element("figcaption", {}, "features"), barChart(shown.features, "hit-features", "feature-bar")),
    );
    if (shown.relevance.length) {
      charts.append(element("figure", {}, element("figcaption", {}, "relevance"), barChart(shown.relevance, "hit-relevance", "relevance-bar")));
    }
    charts.append(element("figure", {}, element("figcaption", {}, "weights"), barChart(shown.weights, "hit-weights", "weight-bar")));
    item.append(
      header,
      element("p", { "data-testid": "hit-text", class: "text" }, hit.text),
      element("p", { "data-testid": "hit-explanation", class: "explanation" }, shown.explanation),
      charts,
    );
    list.append(item);
  });
}

// ---- conversations ---------------------------------------------------------------------------

async function loadConversations() {
  const current = newRequest("conversations");
  const answer = await apiJson(userPath("conversations"));
  if (!current()) return;
  const list = byTestId("conversation-list");
  list.replaceChildren();
  list.dataset.user = view.user;
  if (!answer.conversations.length) {
    list.append(element("li", { class: "empty" }, "no conversations"));
    return;
  }
  for (const conversation of answer.conversations) {
    const button = element(
      "button",
      { type: "button", "data-testid": "conversation-item", "data-conversation-id": conversation.conversation_id },
      element("span", { class: "conversation-id" }, conversation.conversation_id),
      element("span", { class: "meta" }, `${conversation.turns} turn${conversation.turns === 1 ? "" : "s"} · ${conversation.updated_at ?? ""}`),
    );
    button.addEventListener("click", () => guarded(() => openConversation(conversation.conversation_id)));
    list.append(element("li", {}, button));
  }
}

async function openConversation(conversationId) {
  setStatus(`loading ${conversationId}…`);
  const current = newRequest("conversation");
  const answer = await apiJson(userPath("conversations", conversationId));
  if (!current()) return;
  byTestId("conversation-title").textContent = answer.conversation_id;
  renderTranscript(answer.turns);
  renderMoodPlot(byTestId("mood-plot"), byTestId("mood-legend"), answer.turns);
  byTestId("conversation-view").hidden = false;
  setStatus(`${answer.turns.length} turn${answer.turns.length === 1 ? "" : "s"} in ${conversationId}`);
}

function emotionChips(emotions) {
  const strongest = Object.entries(emotions ?? {})
    .filter(([, value]) => typeof value === "number" && value >= 0.005)
    .sort((a, b) => b[1] - a[1]);
  const list = element("ul", { "data-testid": "turn-emotions", class: "emotions" });
  if (!strongest.length) list.append(element("li", { class: "empty" }, "no emotion"));
  for (const [name, value] of strongest) {
    list.append(
      element("li", { "data-testid": "turn-emotion", "data-name": name, "data-value": String(value) }, `${name} ${formatNumber(value, 2)}`),
    );
  }
  return list;
}

function renderTranscript(turns) {
  const transcript = byTestId("transcript");
  transcript.replaceChildren();
  for (const turn of turns) {
    const mood = turn.mood ?? {};
    transcript.append(
      element(
        "article",
        { "data-testid": "turn", "data-index": turn.index, class: "turn", id: `turn-${turn.index}` },
        element("header", {}, `Turn ${turn.index} · ${turn.timestamp ?? ""}`),
        element("p", { "data-testid": "turn-user", class: "said user" }, turn.user),
        element("p", { "data-testid": "turn-assistant", class: "said assistant" }, turn.assistant),
        element(
          "p",
          { "data-testid": "turn-mood", class: "pad" },
          MOOD_DIMS.map(([dim]) => `${dim} ${formatNumber(mood[dim], 2)}`).join(" · "),
        ),
        emotionChips(turn.emotions),
      ),
    );
  }
}

// ---- export and erase ------------------------------------------------------------------------

async function downloadExport() {
  setStatus(`exporting ${view.user}…`);
  const response = await api(userPath("export"));
  const blob = await response.blob();
  const link = element("a", { href: URL.createObjectURL(blob), download: `affect-memory-${view.user}.ndjson` });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 60_000);
  setStatus(`exported ${view.user}`);
}

function openEraseDialog() {
  if (view.user === null) return;
  byTestId("erase-user").textContent = view.user;
  byTestId("erase-confirm-input").value = "";
  byTestId("erase-confirm").disabled = true;
  byTestId("erase-dialog").showModal();
}

async function eraseUser() {
  const user = view.user;
  const typed = byTestId("erase-confirm-input").value;
  if (typed !== user) return; // the dialog's only way to confirm is the user id itself
  byTestId("erase-dialog").close();
  setStatus(`erasing ${user}…`);
  const report = await apiJson(userPath(), { method: "DELETE" });
  await loadUsers();
  const shown = byTestId("erase-report");
  shown.textContent = JSON.stringify(report, null, 2);
  shown.hidden = false;
  setStatus(`erased ${user}`);
}

// ---- wiring ----------------------------------------------------------------------------------

function wire() {
  for (const tab of document.querySelectorAll('[role="tab"]')) {
    tab.addEventListener("click", () => showView(tab.dataset.view));
  }
  byTestId("users-refresh").addEventListener("click", () => guarded(loadUsers));
  byTestId("user-select").addEventListener("change", (event) => guarded(() => selectUser(event.target.value)));
  byTestId("memory-search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    view.q = byTestId("memory-search").value.trim();
    view.offset = 0;
    guarded(loadMemories);
  });
  byTestId("memories-page-size").addEventListener("change", (event) => {
    view.limit = Number(event.target.value);
    view.offset = 0;
    guarded(loadMemories);
  });
  byTestId("memories-prev").addEventListener("click", () => {
    view.offset = Math.max(0, view.offset - view.limit);
    guarded(loadMemories);
  });
  byTestId("memories-next").addEventListener("click", () => {
    view.offset += view.limit;
    guarded(loadMemories);
  });
  byTestId("recall-mood").addEventListener("input", (event) => {
    byTestId("recall-mood-value").textContent = Number(event.target.value).toFixed(2);
  });
  byTestId("recall-form").addEventListener("submit", (event) => {
    event.preventDefault();
    guarded(runRecall);
  });
  byTestId("export-button").addEventListener("click", () => guarded(downloadExport));
  byTestId("erase-button").addEventListener("click", openEraseDialog);
  byTestId("erase-confirm-input").addEventListener("input", (event) => {
    byTestId("erase-confirm").disabled = event.target.value !== view.user;
  });
  byTestId("erase-cancel").addEventListener("click", () => {
    byTestId("erase-dialog").close();
    setStatus("erase cancelled");
  });
  byTestId("erase-form").addEventListener("submit", (event) => {
    event.preventDefault();
    guarded(eraseUser);
  });
  view.limit = Number(byTestId("memories-page-size").value);
}

document.addEventListener("DOMContentLoaded", () => {
  wire();
  guarded(loadUsers);
});
