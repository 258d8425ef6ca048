// dshpy web UI: a small hand-written app, no dependencies.
// Rule: every string that comes from a session is put in the page with textContent
// (through el() below), never as HTML. The page's CSP forbids inline script as well.
"use strict";

(function () {
  const API = "api/sessions";
  const TOKEN_KEY = "dshpy-ui-token";
  const app = document.getElementById("app");
  const crumbs = document.getElementById("crumbs");
  const statusBox = document.getElementById("status");
  let view = null; // the current view's state, so live updates can find it
  let liveAbort = null;

  // ---- token: read once from the URL fragment, kept in sessionStorage, sent as a bearer header
  (function takeToken() {
    const hash = location.hash;
    if (hash.startsWith("#token=")) {
      sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(hash.slice(7)));
      history.replaceState(null, "", location.pathname + "#/");
    }
  })();

  function headers() {
    const token = sessionStorage.getItem(TOKEN_KEY);
    return token ? { Authorization: "Bearer " + token } : {};
  }

  async function api(path, params) {
    const query = params ? "?" + new URLSearchParams(params).toString() : "";
    const response = await fetch(path + query, { headers: headers() });
    let body = null;
    try { body = await response.json(); } catch (e) { body = null; }
    if (!response.ok) {
      const reason = body && body.error ? body.error : response.status + " " + response.statusText;
      const hint = response.status === 401 ? " (open the URL that `dshpy ui` printed: it carries the token)" : "";
      throw new Error(reason + hint);
    }
    return body;
  }

  // ---- DOM helpers (text only)
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    append(node, children);
    return node;
  }
  function append(node, children) {
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
  const svgNS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(svgNS, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
    return append(node, children);
  }

  const fmtNum = (n) => (typeof n === "number" ? n.toLocaleString("en-US") : "–");
  const shortId = (id) => (id || "").replace(/^session-/, "").slice(0, 12);
  function fmtTime(ms) {
    if (typeof ms !== "number") return "–";
    const d = new Date(ms);
    return d.toISOString().replace("T", " ").slice(0, 19);
  }
  function clock(ms) { return typeof ms === "number" ? new Date(ms).toISOString().slice(11, 23) : ""; }
  function tokensOf(total) {
    if (!total) return null;
    return (total.inputTokens || 0) + (total.cacheReadTokens || 0) + (total.cacheWriteTokens || 0) + (total.outputTokens || 0);
  }
  function money(cost) {
    if (!cost || !cost.byModel || cost.byModel.length === 0) return "–";
    if (!cost.complete && cost.total === 0) return "unpriced";
    return "$" + cost.total.toFixed(4) + (cost.complete ? "" : "+");
  }
  function badge(text, extra) { return el("span", { class: "badge " + (text || "") + " " + (extra || "") }, text || "–"); }
  function showError(error) { clear(app).appendChild(el("div", { class: "error-box" }, String(error.message || error))); }
  function setCrumbs(...parts) { clear(crumbs); append(crumbs, parts); }

  // ---- safe markdown: a small subset built as DOM nodes
  const KEYWORDS = new Set(("def class return if elif else for while in import from as with try except finally raise " +
    "lambda yield async await function const let var new this true false null None True False typeof of switch case break continue").split(" "));
  function highlight(code) {
    const out = [];
    const re = /(#[^\n]*|\/\/[^\n]*)|("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`]*`)|(\b\d+(?:\.\d+)?\b)|([A-Za-z_][A-Za-z0-9_]*)/g;
    let last = 0;
    let m;
    while ((m = re.exec(code)) !== null) {
      if (m.index > last) out.push(code.slice(last, m.index));
      if (m[1]) out.push(el("span", { class: "tk-com" }, m[1]));
      else if (m[2]) out.push(el("span", { class: "tk-str" }, m[2]));
      else if (m[3]) out.push(el("span", { class: "tk-num" }, m[3]));
      else if (KEYWORDS.has(m[4])) out.push(el("span", { class: "tk-kw" }, m[4]));
      else out.push(m[4]);
      last = re.lastIndex;
    }
    if (last < code.length) out.push(code.slice(last));
    return out;
  }
  function inline(text) {
    const out = [];
    const re = /(`[^`\n]+`)|(\*\*[^*\n]+\*\*)|(\*[^*\n]+\*)/g;
    let last = 0;
    let m;
    while ((m = re.exec(text)) !== null) {
      if (m.index > last) out.push(text.slice(last, m.index));
      if (m[1]) out.push(el("code", {}, m[1].slice(1, -1)));
      else if (m[2]) out.push(el("strong", {}, m[2].slice(2, -2)));
      else out.push(el("em", {}, m[3].slice(1, -1)));
      last = re.lastIndex;
    }
    if (last < text.length) out.push(text.slice(last));
    return out;
  }
  function markdown(text) {
    const root = el("div", { class: "md" });
    const lines = String(text).split("\n");
    let para = [];
    let list = null;
    const flush = () => {
      if (para.length) root.appendChild(el("p", {}, inline(para.join("\n"))));
      para = [];
      list = null;
    };
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      const fence = line.match(/^```\s*([\w+-]*)\s*$/);
      if (fence) {
        flush();
        const body = [];
        for (i++; i < lines.length && !/^```\s*$/.test(lines[i]); i++) body.push(lines[i]);
        root.appendChild(el("pre", { class: "code", "data-lang": fence[1] || null }, el("code", {}, highlight(body.join("\n")))));
        continue;
      }
      const heading = line.match(/^(#{1,4})\s+(.*)$/);
      if (heading) { flush(); root.appendChild(el("h" + heading[1].length, {}, inline(heading[2]))); continue; }
      const item = line.match(/^\s*([-*]|\d+\.)\s+(.*)$/);
      if (item) {
        if (para.length) { root.appendChild(el("p", {}, inline(para.join("\n")))); para = []; }
        if (!list) { list = el(/\d/.test(item[1]) ? "ol" : "ul"); root.appendChild(list); }
        list.appendChild(el("li", {}, inline(item[2])));
        continue;
      }
      if (line.trim() === "") { flush(); continue; }
      list = null;
      para.push(line);
    }
    flush();
    return root;
  }

  // ---- router
  function route() {
    if (liveAbort) { liveAbort.abort(); liveAbort = null; }
    statusBox.textContent = "";
    statusBox.classList.remove("live");
    const hash = location.hash.replace(/^#/, "") || "/";
    const parts = hash.split("?")[0].split("/").filter(Boolean);
    const params = new URLSearchParams(hash.split("?")[1] || "");
    if (parts[0] === "s" && parts[1]) return sessionView(decodeURIComponent(parts[1]), parts[2] || "transcript", params);
    return listView(params);
  }
  window.addEventListener("hashchange", route);

  // ---- session list
  async function listView(params) {
    setCrumbs("all sessions");
    view = { kind: "list" };
    const form = el("form", { class: "filters", role: "search" },
      el("input", { name: "q", placeholder: "Search all messages and tool output…", value: params.get("q") || "" }),
      el("input", { name: "title", placeholder: "title contains", value: params.get("title") || "" }),
      el("input", { name: "cwd", placeholder: "cwd (exact)", value: params.get("cwd") || "" }),
      (() => {
        const select = el("select", { name: "state", "aria-label": "state" }, el("option", { value: "" }, "any state"));
        for (const s of ["created", "active", "paused", "completed", "failed", "archived"]) {
          select.appendChild(el("option", { value: s, selected: params.get("state") === s }, s));
        }
        return select;
      })(),
      el("button", { class: "primary", type: "submit" }, "Filter"));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const next = new URLSearchParams();
      for (const [key, value] of new FormData(form).entries()) if (value) next.set(key, value);
      location.hash = "#/?" + next.toString();
    });
    const tableBox = el("div", { class: "panel" }, el("p", { class: "muted", style: null }, "Loading…"));
    const pager = el("div", { class: "pager" });
    clear(app);
    append(app, [form, tableBox, pager]);
    const query = {};
    for (const key of ["q", "title", "cwd", "state", "cursor"]) if (params.get(key)) query[key] = params.get(key);
    let page;
    try { page = await api(API, query); } catch (error) { return showError(error); }
    clear(tableBox).appendChild(sessionTable(page));
    const here = new URLSearchParams(params);
    here.delete("cursor");
    if (params.get("cursor")) pager.appendChild(el("a", { href: "#/?" + here.toString() }, "« First page"));
    if (page.nextCursor) {
      const next = new URLSearchParams(here);
      next.set("cursor", page.nextCursor);
      pager.appendChild(el("a", { href: "#/?" + next.toString(), class: "next-page" }, "Next page »"));
    }
    pager.appendChild(el("span", { class: "muted" }, page.sessions.length + " shown" + (page.search ? " matching “" + page.search + "”" : "")));
    performance.mark("dshpy-ready");
    document.body.dataset.ready = "list";
  }

  function sessionTable(page) {
    const table = el("table", { class: "sessions" },
      el("thead", {}, el("tr", {}, ["Session", "cwd", "Created", "Turns", "State", "Last turn", "Tokens", "Cost"].map((h) => el("th", {}, h)))));
    const body = el("tbody");
    const addRow = (row, depth) => {
      const title = el("td", { class: "title-cell" },
        depth ? el("span", { class: "fork-mark", style: null }, "  ".repeat(depth - 1) + "└─ fork") : null,
        el("a", { href: "#/s/" + encodeURIComponent(row.id) }, row.title || "(untitled)"),
        el("span", { class: "mono" }, row.id));
      if (depth) title.style.paddingLeft = 10 + depth * 22 + "px";
      if (row.error) title.appendChild(el("div", { class: "badge failed" }, row.error));
      for (const hit of row.hits || []) title.appendChild(snippet(hit));
      body.appendChild(el("tr", { "data-session": row.id, "data-depth": depth },
        title,
        el("td", { class: "mono" }, row.cwd || "–"),
        el("td", { class: "num" }, fmtTime(row.createdAt)),
        el("td", { class: "num" }, fmtNum(row.turns)),
        el("td", {}, badge(row.state)),
        el("td", {}, badge(row.lastOutcome)),
        el("td", { class: "num" }, fmtNum(tokensOf(row.tokens))),
        el("td", { class: "num" }, money(row.cost))));
      for (const child of row.children || []) addRow(child, depth + 1);
    };
    for (const row of page.sessions) addRow(row, 0);
    if (!page.sessions.length) body.appendChild(el("tr", {}, el("td", { colspan: 8, class: "muted" }, "No sessions.")));
    table.appendChild(body);
    return table;
  }

  function snippet(hit) {
    const text = hit.snippet.text;
    const parts = [];
    let last = 0;
    for (const [start, end] of hit.snippet.highlights) {
      parts.push(text.slice(last, start), el("mark", {}, text.slice(start, end)));
      last = end;
    }
    parts.push(text.slice(last));
    return el("div", { class: "hit" },
      el("a", { href: "#/s/" + encodeURIComponent(hit.sessionId) + "/timeline?from=" + hit.seq }, "seq " + hit.seq), " ",
      hit.snippet.truncatedStart ? "…" : "", parts, hit.snippet.truncatedEnd ? "…" : "");
  }

  // ---- one session
  async function sessionView(id, tab, params) {
    setCrumbs(el("a", { href: "#/" }, "sessions"), " / ", id);
    view = { kind: "session", id, tab, params, head: null };
    const head = el("section", { class: "panel session-head" }, el("p", { class: "muted" }, "Loading…"));
    const tabs = el("nav", { class: "tabs" },
      [["transcript", "Transcript"], ["timeline", "Timeline"], ["forks", "Fork tree"], ["usage", "Usage"]].map(([key, label]) =>
        el("a", { href: "#/s/" + encodeURIComponent(id) + "/" + key, class: key === tab ? "on" : null, "data-tab": key }, label)));
    const body = el("section", { id: "tab-body" }, el("p", { class: "muted" }, "Loading…"));
    clear(app);
    append(app, [head, tabs, body]);
    view.body = body;
    view.headBox = head;
    const info = api(API + "/" + encodeURIComponent(id)).then((session) => {
      view.head = session;
      view.durable = Math.max(view.durable || 0, session.eventCount);
      renderHead(head, session);
      performance.mark("dshpy-head");
      startLive(id, session.eventCount);
      return session;
    });
    try {
      if (tab === "timeline") await timeline(body, id, params);
      else if (tab === "forks") await forkTree(body, await info);
      else if (tab === "usage") await usage(body, id);
      else await transcript(body, id, null);
      await info;
    } catch (error) { return showError(error); }
    performance.mark("dshpy-ready");
    document.body.dataset.ready = tab;
  }

  function renderHead(box, s) {
    const p = s.projections || {};
    const title = (p.title && p.title.title) || "(untitled)";
    const state = p.lifecycle && p.lifecycle.state;
    const total = p.usage && p.usage.total;
    clear(box);
    append(box, [
      el("h1", {}, title),
      el("div", { class: "facts" },
        el("span", { class: "mono" }, s.id),
        el("span", {}, "cwd ", el("b", { class: "mono" }, s.cwd || "–")),
        el("span", {}, "created ", el("b", {}, fmtTime(s.createdAt))),
        el("span", {}, "events ", el("b", { id: "event-count" }, fmtNum(s.eventCount))),
        el("span", {}, "turns ", el("b", {}, fmtNum(p.stats && p.stats.turns))),
        el("span", {}, "state ", badge(state)),
        el("span", {}, "last turn ", badge(s.lastOutcome, "outcome")),
        el("span", {}, "tokens ", el("b", {}, fmtNum(tokensOf(total)))),
        el("span", {}, "cost ", el("b", {}, money(s.cost))),
        s.parentSession ? el("span", {}, "fork of ", el("a", { href: "#/s/" + encodeURIComponent(s.parentSession) }, shortId(s.parentSession))) : null),
    ]);
  }

  // ---- transcript
  async function transcript(box, id, where) {
    const durable = view.durable || 0; // events known durable before the read: the page holds them all
    const page = await api(API + "/" + encodeURIComponent(id) + "/transcript", where || {});
    view.transcript = page;
    clear(box);
    const items = page.items;
    if (page.hasEarlier && items.length) {
      box.appendChild(el("div", { class: "pager" },
        el("button", { class: "earlier", onclick: () => transcript(box, id, { before: String(items[0].at) }) }, "▲ Earlier messages")));
    }
    const list = el("div", { class: "transcript" });
    renderItems(list, items);
    box.appendChild(list);
    if (page.hasLater && items.length) {
      box.appendChild(el("div", { class: "pager" },
        el("button", { class: "later", onclick: () => transcript(box, id, { from: String(items[items.length - 1].at + 1) }) }, "▼ Later messages"),
        el("button", { onclick: () => transcript(box, id, null) }, "Latest")));
    }
    if (!items.length) box.appendChild(el("p", { class: "muted" }, "No messages yet."));
    // a streamed answer whose event is durable and on this page is shown by the page now: its draft goes
    if (view.draft && view.draft.settle !== null && durable > view.draft.settle) view.draft = null;
    renderDraft();
  }

  // ---- a streaming answer: a draft card at the transcript's end, replaced by the committed message
  let drawQueued = false;
  function scheduleDraft() {
    if (drawQueued) return;
    drawQueued = true;
    requestAnimationFrame(() => { drawQueued = false; renderDraft(); });
  }

  function renderDraft() {
    const draft = view && view.draft;
    const list = view && view.tab === "transcript" && view.transcript && !view.transcript.hasLater && view.body
      ? view.body.querySelector(".transcript") : null;
    const rows = view && view.tab === "timeline" && view.timeline && view.timeline.atEnd ? view.timeline.body : null;
    const where = list || rows;
    let node = document.getElementById("draft");
    if (!draft || !where) { if (node) node.remove(); return; }
    if (!node || node.getAttribute("data-attempt") !== draft.attemptId || node.parentNode !== where) {
      if (node) node.remove();
      const streaming = el("span", { class: "streaming" }, "streaming…");
      const text = el("div", { class: "draft-text" });
      const reasoning = el("details", { class: "reasoning", hidden: true }, el("summary", {}, "Reasoning"), el("div", { class: "draft-reasoning" }));
      node = list
        ? el("div", { class: "msg assistant draft", id: "draft", "data-attempt": draft.attemptId, "aria-live": "polite" },
          el("div", { class: "who" }, "assistant", el("span", {}, "turn " + draft.turn + " · step " + draft.step), streaming),
          reasoning, text)
        // the timeline lists what is logged: the draft is a last row marked as not logged (yet)
        : el("tr", { class: "draft", id: "draft", "data-attempt": draft.attemptId },
          el("td", { class: "seq" }, "…"), el("td", { class: "time" }, ""), el("td", { class: "where" }, badge("not logged yet")),
          el("td", { class: "type" }, el("div", { class: "depth-2" },
            el("div", {}, "answer streaming · turn " + draft.turn + " · step " + draft.step + " ", streaming), reasoning, text)));
    }
    where.appendChild(node); // kept last, after rows appended meanwhile
    node.querySelector(".streaming").textContent = draft.settle === null ? "streaming…" : "saving…";
    node.querySelector("details.reasoning").hidden = !draft.reasoning;
    node.querySelector(".draft-reasoning").textContent = draft.reasoning;
    node.querySelector(".draft-text").textContent = draft.text;
  }

  function onStreamFrame(id, frame) {
    if (!view || view.id !== id) return;
    if (frame.type === "start") {
      view.draft = { attemptId: frame.attemptId, turn: frame.turn, step: frame.step, text: "", reasoning: "", settle: null };
    } else if (!view.draft || frame.attemptId !== view.draft.attemptId) {
      return;
    } else if (frame.type === "chunk") {
      const chunk = frame.chunk || {};
      if (chunk.type === "text-delta") view.draft.text += chunk.text || "";
      else if (chunk.type === "reasoning-delta") view.draft.reasoning += chunk.text || "";
    } else if (frame.type === "end") {
      // committed: kept until the transcript shows that event; abandoned: gone now
      if (frame.outcome && frame.outcome.kind === "committed") view.draft.settle = frame.outcome.seq;
      else view.draft = null;
    }
    scheduleDraft();
  }

  function textOf(content) {
    if (typeof content === "string") return content;
    return (content || []).filter((b) => b && b.type === "text").map((b) => b.text).join("\n");
  }

  function renderItems(list, items) {
    const results = new Map();
    const collect = (all) => {
      for (const item of all) {
        if (item.role === "tool" && item.toolCallId) results.set(item.toolCallId, item);
        if (item.shadowed) collect(item.shadowed);
      }
    };
    collect(items);
    const paired = new Set();
    for (const item of items) {
      const node = renderItem(item, results, paired);
      if (node) list.appendChild(node);
    }
    // a result is shown under its call; the ones whose call is on another page stand alone
    for (const node of list.querySelectorAll("[data-result-of]")) {
      if (paired.has(node.getAttribute("data-result-of"))) node.remove();
    }
  }

  function seqTag(item) { return el("span", { class: "seq" }, "seq " + item.seq); }

  function renderItem(item, results, paired) {
    if (item.kind === "attempt") {
      return el("aside", { class: "aside attempt", "data-seq": item.seq },
        el("div", { class: "who" }, "Failed attempt · not part of the history · seq " + item.seq),
        item.text ? el("pre", { class: "plain" }, item.text + "…") : el("span", { class: "muted" }, "(nothing streamed)"));
    }
    if (item.kind === "retry") {
      const d = item.data || {};
      const failure = d.failure || {};
      return el("aside", { class: "aside retry", "data-seq": item.seq },
        el("div", { class: "who" }, "Retry " + d.retry + "/" + d.maxRetries + " after " + d.delayMs + " ms · seq " + item.seq),
        el("span", {}, [failure.code, failure.message].filter(Boolean).join(": ")));
    }
    if (item.kind === "checkpoint") {
      const card = el("div", { class: "msg checkpoint", "data-seq": item.seq },
        el("div", { class: "who" }, "Compaction checkpoint", el("span", {}, "replaces seq " + item.replaces[0] + "–" + item.replaces[1]), seqTag(item)));
      const summary = item.summary && item.summary.summary ? textOf(item.summary.summary) : textOf(item.content);
      card.appendChild(markdown(summary));
      const shadowed = item.shadowed || [];
      const details = el("details", { class: "shadowed" }, el("summary", {}, shadowed.filter((i) => i.kind !== "attempt" && i.kind !== "retry").length + " condensed messages (no longer sent to the model)"));
      const inner = el("div", { class: "shadowed-list" });
      for (const sub of shadowed) {
        const node = renderItem(sub, results, paired);
        if (node) inner.appendChild(node);
      }
      details.appendChild(inner);
      card.appendChild(details);
      return card;
    }
    const role = item.role || "?";
    if (role === "tool") {
      const node = toolBox(item.toolCallId, null, item);
      node.setAttribute("data-result-of", item.toolCallId || "");
      return node;
    }
    const card = el("div", { class: "msg " + role, "data-seq": item.seq, "data-role": role },
      el("div", { class: "who" }, role, item.turn ? el("span", {}, "turn " + item.turn + (item.step ? " · step " + item.step : "")) : null, seqTag(item)));
    const blocks = typeof item.content === "string" ? [{ type: "text", text: item.content }] : item.content || [];
    if (role === "system") {
      card.appendChild(el("details", {}, el("summary", {}, "System prompt"), markdown(textOf(blocks))));
      return card;
    }
    for (const block of blocks) {
      if (!block) continue;
      if (block.type === "reasoning") {
        card.appendChild(el("details", { class: "reasoning" }, el("summary", {}, "Reasoning"), el("div", {}, block.text || "")));
      } else if (block.type === "text") {
        card.appendChild(markdown(block.text || ""));
      } else if (block.type === "tool-call") {
        const result = results.get(block.id);
        if (result) paired.add(block.id);
        card.appendChild(toolBox(block.id, block, result));
      } else {
        card.appendChild(el("pre", { class: "plain muted" }, JSON.stringify(block, null, 2)));
      }
    }
    return card;
  }

  function prettyArgs(args) {
    if (typeof args !== "string") return JSON.stringify(args, null, 2);
    try { return JSON.stringify(JSON.parse(args), null, 2); } catch (e) { return args; }
  }

  function toolBox(callId, call, result) {
    const failed = result && result.isError;
    const box = el("div", { class: "tool" + (failed ? " error" : ""), "data-call": callId || "" },
      el("div", { class: "head" }, el("span", { class: "name" }, call ? call.name : "tool result"), el("span", { class: "muted" }, callId || ""),
        failed ? el("span", {}, "error") : null));
    if (call) box.appendChild(el("pre", { class: "plain args" }, prettyArgs(call.arguments)));
    if (result) box.appendChild(el("pre", { class: "plain result" }, textOf(result.content)));
    else box.appendChild(el("div", { class: "pending" }, "no result logged"));
    return box;
  }

  // ---- timeline
  // indentation: turns and steps as brackets, from the brackets seen on this page and the event's own turn/step
  const bracket = { turn: false, step: false };
  function depthOf(event) {
    const t = event.type;
    if (t === "turn/start" || t === "turn/end") { bracket.turn = t === "turn/start"; bracket.step = false; return 0; }
    if (t === "step/start" || t === "step/end") { bracket.step = t === "step/start"; return 1; }
    const d = event.data || {};
    const own = typeof d.step === "number" ? 2 : typeof d.turn === "number" ? 1 : 0;
    return Math.max(own, bracket.step ? 2 : bracket.turn ? 1 : 0);
  }

  async function timeline(box, id, params) {
    const from = Number(params.get("from") || 0);
    const visible = params.get("visible") === "1";
    const link = (f, v) => "#/s/" + encodeURIComponent(id) + "/timeline?from=" + f + (v ? "&visible=1" : "");
    const page = await api(API + "/" + encodeURIComponent(id) + "/events", { from: String(from), visible: visible ? "1" : "0" });
    const toggle = el("label", {}, el("input", { type: "checkbox", checked: visible, id: "visible-only",
      onchange: (e) => { location.hash = link(0, e.target.checked); } }), " model-visible only");
    const jump = el("input", { type: "number", min: 0, placeholder: "seq", "aria-label": "jump to seq" });
    const tools = el("div", { class: "tl-tools" }, toggle,
      el("a", { href: link(Math.max(0, from - 200), visible) }, "« Earlier"),
      page.nextSeq !== null ? el("a", { href: link(page.nextSeq, visible), class: "tl-next" }, "Later »") : el("span", { class: "muted" }, "end of log"),
      el("a", { href: link(Math.max(0, page.eventCount - 200), visible) }, "Last events"),
      jump, el("button", { onclick: () => { location.hash = link(Number(jump.value || 0), visible); } }, "Go"),
      el("span", { class: "muted" }, page.eventCount.toLocaleString("en-US") + " events"),
      page.pending ? el("span", { class: "muted" }, "(surface labels: still folding the log, reload in a moment)") : null);
    const body = el("tbody");
    bracket.turn = false;
    bracket.step = false;
    for (const entry of page.entries) body.appendChild(timelineRow(id, entry.event, entry.surface));
    clear(box);
    append(box, [tools, el("div", { class: "panel" }, el("table", { class: "timeline" }, body))]);
    view.timeline = { body, atEnd: page.nextSeq === null && !visible };
  }

  function timelineRow(id, event, surface) {
    const t = event.type;
    const cls = t.startsWith("turn/") ? "turn" : t.startsWith("step/") ? "step" : t === "assistant/attempt" ? "attempt" : t === "llm/retry" ? "retry" : "";
    const details = el("details", {}, el("summary", {}, t, summaryOf(event)));
    details.addEventListener("toggle", () => {
      if (details.open && details.childElementCount === 1) details.appendChild(el("pre", {}, JSON.stringify(event, null, 2)));
    }, { once: false });
    const typeCell = el("td", { class: "type" }, el("div", { class: "depth-" + depthOf(event) }, details,
      t === "turn/end" ? el("span", { class: "fork-hint" },
        el("button", { class: "fork", title: "create a fork that inherits seq 0.." + event.seq, onclick: () => forkAt(id, event.seq) }, "Fork here"),
        " or: dshpy sessions fork " + id + " --at " + event.seq) : null));
    return el("tr", { class: cls, "data-seq": event.seq, "data-type": t },
      el("td", { class: "seq" }, String(event.seq)),
      el("td", { class: "time" }, clock(event.time)),
      el("td", { class: "where" }, surface === "log-only" || !surface ? "" : badge(surface)),
      typeCell);
  }

  // fork through the server's own JSON-RPC endpoint (same origin, same token), then open the child
  async function forkAt(id, boundary) {
    const frame = { jsonrpc: "2.0", id: 1, method: "session.fork", params: { sessionId: id, boundary } };
    try {
      const response = await fetch("../rpc", { method: "POST", headers: { ...headers(), "Content-Type": "application/json" }, body: JSON.stringify(frame) });
      const answer = await response.json();
      if (answer.error) throw new Error("fork refused: " + answer.error.message);
      location.hash = "#/s/" + encodeURIComponent(answer.result.id) + "/forks";
    } catch (error) { showError(error); }
  }

  function summaryOf(event) {
    const d = event.data || {};
    let text = "";
    if (event.type === "turn/end" && d.reason) text = d.reason.kind;
    else if (event.type === "tool/call") text = d.name;
    else if (d.message) text = textOf(d.message.content);
    else if (event.type === "user/message") text = textOf(d.content);
    else if (event.type === "llm/retry" && d.failure) text = d.failure.message || d.failure.code;
    text = String(text || "").replace(/\s+/g, " ");
    return text ? el("span", { class: "muted" }, " — " + (text.length > 120 ? text.slice(0, 120) + "…" : text)) : null;
  }

  // ---- fork tree
  async function forkTree(box, session) {
    const lineage = session.lineage;
    const node = (info, here) => el("span", { class: "node" + (here ? " here" : ""), "data-session": info.id },
      el("a", { href: "#/s/" + encodeURIComponent(info.id) + "/forks" }, shortId(info.id)),
      el("span", { class: "muted" }, fmtTime(info.createdAt)),
      el("span", {}, fmtNum(info.eventCount) + " events"),
      info.boundary !== undefined && info.boundary !== null ? el("span", { class: "boundary" }, "forked at seq " + info.boundary) : null);
    const branch = (forks) => {
      const ul = el("ul", { class: "tree" });
      for (const fork of forks) ul.appendChild(el("li", {}, node(fork.session, false), fork.forks.length ? branch(fork.forks) : null));
      return ul;
    };
    let tree = el("li", {}, node(lineage.target, true), lineage.descendants.length ? branch(lineage.descendants) : null);
    for (const ancestor of lineage.ancestors) tree = el("li", {}, node(ancestor, false), el("ul", { class: "tree" }, tree));
    clear(box);
    append(box, [
      el("div", { class: "panel", style: null }, el("div", { class: "chart" },
        el("h3", {}, "Ancestors and forks"),
        lineage.unresolvedParentId ? el("p", { class: "error-box" }, "parent " + lineage.unresolvedParentId + " is not in this store") : null,
        el("ul", { class: "tree root" }, tree))),
      el("p", { class: "hint" }, "Fork this session at a turn's end (the timeline shows each turn's seq): ",
        el("code", {}, "dshpy sessions fork " + session.id + " --at SEQ")),
    ]);
  }

  // ---- usage
  async function usage(box, id) {
    const data = await api(API + "/" + encodeURIComponent(id) + "/usage");
    const total = data.total || {};
    const stats = data.stats || {};
    const card = (k, v) => el("div", { class: "panel card" }, el("div", { class: "v" }, v), el("div", { class: "k" }, k));
    clear(box);
    box.appendChild(el("div", { class: "cards" },
      card("input (uncached)", fmtNum(total.inputTokens)), card("cache read", fmtNum(total.cacheReadTokens)),
      card("output", fmtNum(total.outputTokens)), card("reasoning", fmtNum(total.reasoningTokens)),
      card("model calls / failed", fmtNum(stats.modelCalls) + " / " + fmtNum(stats.failedModelCalls)),
      card("tool calls / errors", fmtNum(stats.toolCalls) + " / " + fmtNum(stats.toolErrors)),
      card("cost", money(data.cost))));
    const turns = data.turns.slice(-120);
    // reasoning is a part of output: stacked as output minus reasoning, then reasoning
    const series = [["input", "#7aa2f7", "input (uncached)"], ["cached", "#9ece6a", "cache read"], ["answer", "#e0af68", "output"], ["reasoning", "#bb9af7", "of which reasoning"]];
    const split = (t) => ({ input: t.inputTokens || 0, cached: t.cacheReadTokens || 0,
      answer: Math.max(0, (t.outputTokens || 0) - (t.reasoningTokens || 0)), reasoning: t.reasoningTokens || 0 });
    box.appendChild(el("div", { class: "panel chart", id: "tokens-chart" },
      el("h3", {}, "Tokens per turn" + (data.turns.length > turns.length ? " (last " + turns.length + " of " + data.turns.length + ")" : "")),
      barChart(turns.map((t) => ({ label: "turn " + t.turn, tick: String(t.turn), values: series.map(([k]) => split(t)[k]) })), series.map((s) => s[1])),
      el("div", { class: "legend" }, series.map(([, color, name]) => el("span", {}, el("i", { style: null, "data-color": color }), name)))));
    for (const swatch of box.querySelectorAll("[data-color]")) swatch.style.background = swatch.getAttribute("data-color");
    const steps = data.steps.slice(-120);
    box.appendChild(el("div", { class: "panel chart", id: "steps-chart" },
      el("h3", {}, "Time per step (ms)" + (data.steps.length > steps.length ? " (last " + steps.length + ")" : "")),
      barChart(steps.map((s) => ({ label: "turn " + s.turn + " step " + s.step, tick: s.turn + "." + s.step, values: [s.ms] })), ["#7dcfff"])));
  }

  function barChart(rows, colors) {
    const width = 1000, height = 160, pad = 28;
    const max = Math.max(1, ...rows.map((r) => r.values.reduce((a, b) => a + b, 0)));
    const chart = svg("svg", { viewBox: `0 0 ${width} ${height + 18}`, width: "100%", role: "img" });
    chart.appendChild(svg("text", { x: 0, y: 10 }, fmtNum(max)));
    chart.appendChild(svg("line", { x1: pad, x2: width, y1: height, y2: height, stroke: "#d5d9e3" }));
    const slot = (width - pad) / Math.max(1, rows.length);
    rows.forEach((row, i) => {
      let y = height;
      const group = svg("g", { class: "bar" }, svg("title", {}, row.label + ": " + row.values.map(fmtNum).join(" + ")));
      chart.appendChild(group);
      row.values.forEach((value, k) => {
        const h = (value / max) * (height - 16);
        if (h <= 0) return;
        y -= h;
        const barWidth = Math.max(1, Math.min(36, slot * 0.7));
        const bar = svg("rect", { x: pad + i * slot + (slot - barWidth) / 2, y, width: barWidth, height: h, fill: colors[k], rx: 2 });
        group.appendChild(bar);
      });
    });
    if (rows.length <= 40) {
      rows.forEach((row, i) => chart.appendChild(svg("text", { x: pad + i * slot + slot / 2, y: height + 13, "text-anchor": "middle" }, row.tick)));
    }
    if (!rows.length) chart.appendChild(svg("text", { x: pad + 10, y: height / 2 }, "no data yet"));
    return chart;
  }

  // ---- live: the session's new events, as they commit (fetch-based SSE, so the token goes in a header)
  async function startLive(id, fromSeq) {
    const controller = new AbortController();
    liveAbort = controller;
    let next = fromSeq;
    let refresh = null;
    try {
      const response = await fetch(API + "/" + encodeURIComponent(id) + "/live?from=" + fromSeq, { headers: headers(), signal: controller.signal });
      if (!response.ok || !response.body) return;
      statusBox.textContent = "live";
      statusBox.classList.add("live");
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const data = frame.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
          const named = frame.match(/^event: (.*)$/m);
          if (!data) continue;
          if (named && named[1] === "stream") { onStreamFrame(id, JSON.parse(data)); continue; }
          if (named) continue;
          const event = JSON.parse(data);
          next = event.seq + 1;
          if (view && view.id === id) view.durable = next;
          onLiveEvent(id, event);
          clearTimeout(refresh);
          refresh = setTimeout(() => refreshSession(id), 250);
        }
      }
    } catch (error) {
      if (controller.signal.aborted) return;
    }
    if (liveAbort === controller) { statusBox.textContent = "disconnected"; statusBox.classList.remove("live"); }
    return next;
  }

  function onLiveEvent(id, event) {
    if (!view || view.id !== id) return;
    const count = document.getElementById("event-count");
    if (count) count.textContent = fmtNum(event.seq + 1);
    if (view.tab === "timeline" && view.timeline && view.timeline.atEnd) {
      view.timeline.body.appendChild(timelineRow(id, event, event.surfaceOp ? "current" : "log-only"));
      // the event that holds a streamed answer is a row now: the draft row goes
      if (view.draft && view.draft.settle !== null && event.seq >= view.draft.settle) view.draft = null;
      renderDraft();
    }
  }

  async function refreshSession(id) {
    if (!view || view.id !== id) return;
    try {
      const session = await api(API + "/" + encodeURIComponent(id));
      if (view.id !== id) return;
      renderHead(view.headBox, session);
      const page = view.transcript;
      if (view.tab === "transcript" && page && !page.hasLater) {
        await transcript(view.body, id, null);
      }
    } catch (error) { /* the next event retries */ }
  }

  route();
})();
