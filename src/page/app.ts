/**
 * The chat page `k3 serve` serves at `/`: a conversation with Kimi K3 over the public API
 * (api.ts), kept in localStorage (store.ts), with the reasoning folded under each answer and the
 * answer rendered as sanitised Markdown (markdown.ts). Model text reaches the DOM only as
 * textContent or through renderMarkdown.
 */
import { ApiError, chatRequest, listModels, streamChat, type ChatSettings, type Effort } from "./api.ts";
import { renderMarkdown } from "./markdown.ts";
import { exportConversation, ImportError, maxImportBytes, parseConversation, titleOf, type Message } from "./messages.ts";
import { dropOldestTurn } from "./history.ts";
import { describeFinished, describeLive, type LiveTurn, type Phase } from "./stats.ts";
import { load, newConversation, save, type Conversation, type Note, type Saved } from "./store.ts";

const apiKeyStorage = "k3.apiKey";

function byId<T extends HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (!found) throw new Error(`the page has no #${id}`);
  return found as T;
}

const ui = {
  modelName: byId("model-name"),
  conversation: byId("conversation"),
  empty: byId("empty"),
  history: byId<HTMLSelectElement>("history"),
  newChat: byId<HTMLButtonElement>("new-chat"),
  deleteChat: byId<HTMLButtonElement>("delete-chat"),
  exportButton: byId<HTMLButtonElement>("export"),
  importButton: byId<HTMLButtonElement>("import-button"),
  importInput: byId<HTMLInputElement>("import"),
  settings: byId<HTMLDetailsElement>("settings"),
  settingsForm: byId<HTMLFormElement>("settings-form"),
  thinking: byId<HTMLInputElement>("thinking"),
  effort: byId<HTMLSelectElement>("effort"),
  temperature: byId<HTMLInputElement>("temperature"),
  topP: byId<HTMLInputElement>("top-p"),
  maxTokens: byId<HTMLInputElement>("max-tokens"),
  seed: byId<HTMLInputElement>("seed"),
  status: byId("status"),
  ticker: byId("ticker"),
  composer: byId<HTMLFormElement>("composer"),
  prompt: byId<HTMLTextAreaElement>("prompt"),
  send: byId<HTMLButtonElement>("send"),
  stop: byId<HTMLButtonElement>("stop"),
  keyDialog: byId<HTMLDialogElement>("key-dialog"),
  keyCancel: byId<HTMLButtonElement>("key-cancel"),
  overflow: byId<HTMLDivElement>("overflow"),
  overflowDrop: byId<HTMLButtonElement>("overflow-drop"),
  overflowNew: byId<HTMLButtonElement>("overflow-new"),
  keyReason: byId("key-reason"),
  keyInput: byId<HTMLInputElement>("api-key"),
};

const loaded = load(localStorage);
const state: Saved = loaded.saved;
let apiKey = sessionStorage.getItem(apiKeyStorage) ?? undefined;
let model = "kimi-k3";

/** The reply being streamed, if any, and where it is. */
let active: { controller: AbortController; conversation: Conversation; index: number } | undefined;
let livePhase: Phase | undefined;

const current = (): Conversation => state.conversations.find((c) => c.id === state.current) as Conversation;

function setStatus(text: string, error = false): void {
  ui.status.textContent = text;
  ui.status.className = error ? "error" : "";
  ui.ticker.textContent = "";
}

function persist(): void {
  const problem = save(localStorage, state);
  if (problem) setStatus(problem, true);
}

// ---- settings ----------------------------------------------------------------------------

function showSettings(s: ChatSettings): void {
  ui.thinking.checked = s.thinking;
  ui.effort.value = s.effort;
  ui.effort.disabled = !s.thinking;
  ui.temperature.value = String(s.temperature);
  ui.topP.value = String(s.topP);
  ui.maxTokens.value = s.maxTokens === undefined ? "" : String(s.maxTokens);
  ui.seed.value = s.seed === undefined ? "" : String(s.seed);
}

/** The form's settings; a field that is not a number keeps the last good value. */
function readSettings(): ChatSettings {
  const number = (input: HTMLInputElement, fallback: number | undefined, blank: number | undefined) => {
    if (input.value.trim() === "") return blank;
    const value = Number(input.value);
    return Number.isFinite(value) ? value : fallback;
  };
  const s = state.settings;
  return {
    thinking: ui.thinking.checked,
    effort: ui.effort.value as Effort,
    temperature: number(ui.temperature, s.temperature, s.temperature) as number,
    topP: number(ui.topP, s.topP, s.topP) as number,
    maxTokens: number(ui.maxTokens, s.maxTokens, undefined),
    seed: number(ui.seed, s.seed, undefined),
  };
}

ui.settingsForm.addEventListener("input", () => {
  state.settings = readSettings();
  ui.effort.disabled = !state.settings.thinking;
  persist();
});
ui.settingsForm.addEventListener("submit", (event) => event.preventDefault());

// ---- rendering ---------------------------------------------------------------------------

const who: Record<Message["role"], string> = { user: "You", assistant: "Kimi K3", system: "System", tool: "Tool result" };

function element<K extends keyof HTMLElementTagNameMap>(tag: K, className?: string, text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** The parts of an assistant message's article that change while it streams. */
interface AssistantView {
  article: HTMLElement;
  reasoning: HTMLDetailsElement;
  reasoningLabel: HTMLElement;
  reasoningText: HTMLElement;
  answer: HTMLElement;
  calls: HTMLElement;
  note: HTMLElement;
}

const views = new Map<number, AssistantView>();

function assistantArticle(): AssistantView {
  const article = element("article", "message assistant");
  article.append(element("div", "who", who.assistant));
  const reasoning = element("details", "reasoning");
  const summary = element("summary");
  const reasoningLabel = element("span", undefined, "Reasoning");
  summary.append(reasoningLabel);
  const reasoningText = element("div", "reasoning-text");
  reasoning.append(summary, reasoningText);
  const answer = element("div", "answer");
  const calls = element("div", "tool-calls");
  const note = element("p", "turn-stats");
  article.append(reasoning, answer, calls, note);
  return { article, reasoning, reasoningLabel, reasoningText, answer, calls, note };
}

function fillAssistant(view: AssistantView, m: Message, note: Note | undefined, streaming: Phase | undefined): void {
  const reasoning = m.reasoning_content ?? "";
  // Thinking off sends null: then there is no reasoning to fold away.
  view.reasoning.hidden = m.reasoning_content === null || m.reasoning_content === undefined || (reasoning === "" && streaming === undefined);
  view.reasoningLabel.textContent = streaming === "waiting" || streaming === "prefill" ? "Reasoning (waiting for the first token)"
    : streaming === "thinking" ? `Thinking… (${reasoning.length} characters)` : `Reasoning (${reasoning.length} characters)`;
  if (view.reasoningText.textContent !== reasoning) view.reasoningText.textContent = reasoning;
  view.answer.replaceChildren(renderMarkdown(m.content ?? ""));
  view.answer.classList.toggle("pending", streaming !== undefined);
  view.calls.replaceChildren(...(m.tool_calls ?? []).map((c) => element("div", "tool-call", `${c.function.name}(${c.function.arguments})`)));
  const noteText = streaming ? "" : note?.error ?? note?.stats ?? (note?.partial ? "Interrupted: the page was left while this reply streamed" : "");
  view.note.textContent = noteText;
  view.note.hidden = noteText === "";
  view.note.className = note?.error || note?.partial ? "turn-stats error" : "turn-stats";
  view.article.setAttribute("aria-busy", streaming ? "true" : "false");
  if (!streaming && m.content === null && reasoning !== "" && !m.tool_calls) {
    const why = note?.stopped ? "(stopped while thinking)" : note?.partial ? "(interrupted while thinking)" : "(no answer: the reply ended while thinking)";
    view.answer.replaceChildren(element("p", "placeholder", why));
  }
}

function plainArticle(m: Message): HTMLElement {
  const article = element("article", `message ${m.role}`);
  article.append(element("div", "who", m.role === "tool" && m.tool_call_id ? `${who.tool} (${m.tool_call_id})` : who[m.role]), element("div", "text", m.content ?? ""));
  return article;
}

function renderConversation(): void {
  const c = current();
  views.clear();
  const articles = c.messages.map((m, i) => {
    if (m.role !== "assistant") return plainArticle(m);
    const view = assistantArticle();
    views.set(i, view);
    fillAssistant(view, m, c.notes[i], active?.conversation === c && active.index === i ? livePhase : undefined);
    return view.article;
  });
  ui.empty.hidden = articles.length > 0;
  ui.conversation.replaceChildren(ui.empty, ...articles);
  ui.conversation.scrollTop = ui.conversation.scrollHeight;
  renderHistory();
}

function renderHistory(): void {
  const sorted = [...state.conversations].sort((a, b) => b.updated - a.updated);
  ui.history.replaceChildren(...sorted.map((c) => {
    const option = element("option", undefined, titleOf(c.messages));
    option.value = c.id;
    option.selected = c.id === state.current;
    return option;
  }));
}

function setBusy(busy: boolean): void {
  ui.send.disabled = busy;
  ui.stop.disabled = !busy;
  ui.history.disabled = busy;
  ui.newChat.disabled = busy;
  ui.deleteChat.disabled = busy;
  ui.importButton.disabled = busy;
}

// ---- the API key -------------------------------------------------------------------------

ui.keyCancel.addEventListener("click", () => ui.keyDialog.close("cancel"));

/** Asks for the key; undefined when the user cancels. */
function askKey(reason: string): Promise<string | undefined> {
  ui.keyReason.textContent = reason;
  ui.keyInput.value = "";
  ui.keyDialog.showModal();
  return new Promise((resolve) => {
    ui.keyDialog.addEventListener("close", () => {
      const key = ui.keyInput.value.trim();
      resolve(ui.keyDialog.returnValue === "ok" && key !== "" ? key : undefined);
    }, { once: true });
  });
}

/** Runs `call` with the key, asking for one (again) whenever the server answers 401. */
async function withKey<T>(call: (key: string | undefined) => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await call(apiKey);
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 401) throw error;
      const key = await askKey(apiKey === undefined
        ? "This server needs an API key (k3 serve --api-key). It is kept in this tab only (sessionStorage)."
        : "The server refused that key. Enter the key k3 serve was started with.");
      if (key === undefined) throw new ApiError(401, "no API key was given; the server needs one");
      apiKey = key;
      sessionStorage.setItem(apiKeyStorage, key);
    }
  }
}

// ---- a turn ------------------------------------------------------------------------------

async function send(text: string): Promise<void> {
  if (active || text.trim() === "") return;
  ui.overflow.hidden = true;
  const c = current();
  const settings = readSettings();
  state.settings = settings;
  c.messages.push({ role: "user", content: text });
  const request = chatRequest(model, [...c.messages], settings);
  const message: Message = { role: "assistant", content: null, reasoning_content: settings.thinking ? "" : null };
  const index = c.messages.push(message) - 1;
  c.notes[index] = { partial: true };
  c.updated = Date.now();
  const controller = new AbortController();
  active = { controller, conversation: c, index };
  livePhase = "waiting";
  ui.prompt.value = "";
  setBusy(true);
  renderConversation();
  persist();

  const started = performance.now();
  const live: LiveTurn = { phase: "waiting", elapsedSeconds: 0, firstDeltaSeconds: undefined, deltas: 0 };
  let finishReason: string | undefined;
  let usage: Parameters<typeof describeFinished>[0]["usage"];
  let k3: Parameters<typeof describeFinished>[0]["k3"];
  let frame = 0;
  let savedAt = performance.now();
  const view = () => views.get(index);
  const paint = () => {
    frame = 0;
    // What has come so far survives a reload or a closed tab (at most a second of it is lost).
    if (performance.now() - savedAt > 1000) {
      savedAt = performance.now();
      persist();
    }
    const v = view();
    if (v && current() === c) {
      const nearBottom = ui.conversation.scrollHeight - ui.conversation.scrollTop - ui.conversation.clientHeight < 80;
      fillAssistant(v, message, c.notes[index], live.phase);
      if (nearBottom) ui.conversation.scrollTop = ui.conversation.scrollHeight;
    }
  };
  const schedule = () => {
    if (frame === 0) frame = requestAnimationFrame(paint);
  };
  const phase = (next: Phase) => {
    if (live.phase === next) return;
    live.phase = next;
    livePhase = next;
    // For screen readers (role=status) only: the ticker beside it already starts with the phase.
    ui.status.textContent = { waiting: "Waiting", prefill: "Prefill", thinking: "Thinking", answering: "Answering" }[next];
    ui.status.className = "visually-hidden";
  };
  const delta = () => {
    live.deltas++;
    live.firstDeltaSeconds ??= (performance.now() - started) / 1000;
    schedule();
  };
  const tick = () => {
    live.elapsedSeconds = (performance.now() - started) / 1000;
    ui.ticker.textContent = describeLive(live);
  };
  ui.status.textContent = "Waiting";
  ui.status.className = "visually-hidden";
  tick();
  const ticker = setInterval(tick, 250);

  let stopped = false;
  let failure: string | undefined;
  let outgrown = false;
  try {
    await withKey((key) => streamChat(request, key, controller.signal, {
      onReasoning: (t) => {
        phase("thinking");
        message.reasoning_content = (message.reasoning_content ?? "") + t;
        delta();
      },
      onContent: (t) => {
        phase("answering");
        message.content = (message.content ?? "") + t;
        delta();
      },
      onToolCalls: (calls) => {
        message.tool_calls = calls;
        delta();
      },
      onFinish: (reason) => { finishReason = reason; },
      onUsage: (u, stats) => {
        usage = u;
        k3 = stats;
      },
      onProgress: (p) => {
        // Shown as it comes: on a fast engine the whole prefill is over before the next tick.
        if (p.kind === "queue") live.queueAhead = p.ahead;
        else if (live.phase === "waiting" || live.phase === "prefill") {
          live.prefill = { ...p, arrivedSeconds: (performance.now() - started) / 1000 };
          phase("prefill");
        }
        tick();
      },
    }));
  } catch (error) {
    if (controller.signal.aborted) stopped = true;
    else failure = error instanceof Error ? error.message : String(error);
    outgrown = error instanceof ApiError && error.code === "context_length_exceeded";
  }
  clearInterval(ticker);
  if (frame) cancelAnimationFrame(frame);
  const finished = {
    usage, k3, finishReason, stopped, elapsedSeconds: (performance.now() - started) / 1000, firstDeltaSeconds: live.firstDeltaSeconds, deltas: live.deltas,
  };
  const nothing = message.content === null && !message.reasoning_content && !message.tool_calls;
  active = undefined;
  livePhase = undefined;
  if (nothing && (stopped || failure !== undefined)) {
    // Nothing came back: the turn is taken back and its text returned to the box.
    c.messages.splice(index - 1, 2);
    delete c.notes[index];
    if (ui.prompt.value === "") ui.prompt.value = text;
    setStatus(failure === undefined ? "Stopped before the reply began" : `Error: ${failure}`, failure !== undefined);
  } else {
    const stats = describeFinished(finished);
    c.notes[index] = failure === undefined ? { stats, ...(stopped ? { stopped } : {}) } : { error: `Error: ${failure}` };
    if (failure === undefined) setStatus(stats);
    else setStatus(`Error: ${failure}`, true);
  }
  c.updated = Date.now();
  setBusy(false);
  renderConversation();
  persist();
  // The way on: fewer turns (the message is back in the box, to send again) or a new conversation.
  ui.overflow.hidden = !outgrown;
  ui.overflowDrop.disabled = dropOldestTurn(c.messages, c.notes, true).dropped === 0;
  ui.prompt.focus();
}

ui.overflowDrop.addEventListener("click", () => {
  const c = current();
  const trimmed = dropOldestTurn(c.messages, c.notes, true); // the refused message waits in the box
  c.messages = trimmed.messages;
  c.notes = trimmed.notes;
  c.updated = Date.now();
  ui.overflow.hidden = true;
  setStatus(`Dropped the oldest turn (${trimmed.dropped} messages); send again`);
  renderConversation();
  persist();
  ui.prompt.focus();
});
ui.overflowNew.addEventListener("click", () => {
  ui.overflow.hidden = true;
  ui.newChat.click();
});

function stop(): void {
  active?.controller.abort();
}

// Leaving mid-reply: keep what came (its note still says partial, so it reads back as interrupted).
addEventListener("pagehide", () => {
  if (active) persist();
});

// ---- events ------------------------------------------------------------------------------

ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  void send(ui.prompt.value);
});

ui.prompt.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing && !event.altKey && !event.ctrlKey && !event.metaKey) {
    event.preventDefault();
    ui.composer.requestSubmit();
  }
});

document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && active && !ui.keyDialog.open) {
    event.preventDefault();
    stop();
  }
});

ui.stop.addEventListener("click", stop);

ui.newChat.addEventListener("click", () => {
  const c = current();
  if (c.messages.length > 0) {
    const next = newConversation();
    state.conversations.push(next);
    state.current = next.id;
  }
  setStatus("");
  renderConversation();
  persist();
  ui.prompt.focus();
});

ui.history.addEventListener("change", () => {
  state.current = ui.history.value;
  setStatus("");
  renderConversation();
  persist();
});

ui.deleteChat.addEventListener("click", () => {
  const c = current();
  if (c.messages.length > 0 && !confirm(`Delete “${titleOf(c.messages)}”? Export it first to keep a copy.`)) return;
  state.conversations = state.conversations.filter((x) => x !== c);
  if (state.conversations.length === 0) state.conversations.push(newConversation());
  state.current = [...state.conversations].sort((a, b) => b.updated - a.updated)[0]!.id;
  setStatus("Conversation deleted");
  renderConversation();
  persist();
});

ui.exportButton.addEventListener("click", () => {
  const c = current();
  const blob = new Blob([exportConversation(c.messages)], { type: "application/json" });
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  const day = new Date(c.updated).toISOString().slice(0, 10);
  link.download = `k3-chat-${day}.json`;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
  setStatus(`Exported ${c.messages.length} messages (OpenAI messages JSON; k3 chat /load reads it)`);
});

ui.importButton.addEventListener("click", () => ui.importInput.click());

ui.importInput.addEventListener("change", async () => {
  const file = ui.importInput.files?.[0];
  ui.importInput.value = "";
  if (!file) return;
  try {
    if (file.size > maxImportBytes) throw new ImportError(`the file is ${file.size} bytes; the limit is ${maxImportBytes}`);
    const messages = parseConversation(await file.text());
    const c = { ...newConversation(), messages };
    state.conversations.push(c);
    state.current = c.id;
    renderConversation();
    persist();
    setStatus(`Imported ${messages.length} messages from ${file.name}; the next turn sends them`);
  } catch (error) {
    setStatus(`Import of ${file.name} failed: ${error instanceof Error ? error.message : String(error)}`, true);
  }
});

// ---- start -------------------------------------------------------------------------------

showSettings(state.settings);
if (matchMedia("(max-width: 700px)").matches) ui.settings.open = false;
renderConversation();
if (loaded.problem) setStatus(loaded.problem, true);
void withKey(listModels).then((ids) => {
  model = ids[0] ?? model;
  ui.modelName.textContent = model;
  if (!loaded.problem) setStatus("Ready");
}, (error: unknown) => {
  setStatus(`The server did not answer /v1/models: ${error instanceof Error ? error.message : String(error)}`, true);
});
ui.prompt.focus();
