/* llama-consciousness inspector: a read-only page over the JSON API of llama_consciousness/ui/server.py.
 *
 * Every text that comes from the memory is inserted as a text node (el(), svg(), textContent): never as markup.
 * No framework, no build step, nothing fetched from elsewhere.
 */
"use strict";

(() => {
  const SVG_NS = "http://www.w3.org/2000/svg";
  const TIERS = ["focus", "peripheral", "background"];
  const LEVELS = ["N1", "N2", "N3"];
  const LEVEL_NAMES = { N1: "personal", N2: "collective", N3: "ecosystem" };

  // ---------------------------------------------------------------------------------------------------------
  // DOM helpers: attributes by setAttribute, children as text nodes or elements

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    setAttrs(node, attrs);
    append(node, children);
    return node;
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    setAttrs(node, attrs);
    append(node, children);
    return node;
  }

  function setAttrs(node, attrs) {
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (/^on/i.test(name) || name === "style") throw new Error(`refusing attribute ${name}`);
      node.setAttribute(name, value === true ? "" : String(value));
    }
  }

  function append(node, children) {
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
    }
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  const $ = (id) => document.getElementById(id);

  // ---------------------------------------------------------------------------------------------------------
  // formatting

  function fmtTime(iso) {
    if (!iso) return "—";
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) return String(iso);
    return date.toISOString().slice(0, 16).replace("T", " ");
  }

  function fmtDay(iso) {
    return iso ? fmtTime(iso).slice(0, 10) : "—";
  }

  function num(value, digits = 2) {
    return typeof value === "number" && Number.isFinite(value) ? value.toFixed(digits) : "—";
  }

  function truncate(text, max) {
    const s = String(text || "");
    return s.length <= max ? s : s.slice(0, max - 1) + "…";
  }

  function levelOf(node) {
    if (node && node.level) return node.level;
    const source = (node && node.retrieval_source) || "";
    const head = source.split("_", 1)[0];
    return LEVELS.includes(head) ? head : "?";
  }

  function splitGraphId(gid) {
    const at = gid.indexOf(":");
    if (at < 0) return { level: null, id: gid };
    return { level: gid.slice(0, at), id: gid.slice(at + 1) };
  }

  function levelTag(level) {
    return el("span", { class: `level-tag level-${LEVELS.includes(level) ? level : "x"}`, title: LEVEL_NAMES[level] || "" }, level || "?");
  }

  function badge(text, kind) {
    return el("span", { class: `badge${kind ? " badge-" + kind : ""}` }, text);
  }

  function meter(label, value, kind) {
    const fill = el("span", { class: `meter-fill${kind ? " meter-" + kind : ""}` });
    const v = typeof value === "number" && Number.isFinite(value) ? Math.max(0, Math.min(1, value)) : 0;
    fill.style.width = `${(v * 100).toFixed(1)}%`;
    return el("span", { class: "meter", title: `${label} ${num(value)}` },
      el("span", { class: "meter-label" }, label),
      el("span", { class: "meter-track" }, fill),
      el("span", { class: "meter-value" }, num(value)));
  }

  function emotionChips(vector, top = 5) {
    const items = Object.entries(vector || {}).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).slice(0, top);
    if (!items.length) return null;
    return el("span", { class: "chips" }, items.map(([name, value]) => el("span", { class: "chip" }, `${name} ${num(value, 1)}`)));
  }

  function kv(pairs) {
    const dl = el("dl", { class: "kv" });
    for (const [key, value] of pairs) {
      if (value === undefined || value === null || value === "") continue;
      dl.appendChild(el("dt", null, key));
      dl.appendChild(el("dd", null, value));
    }
    return dl;
  }

  // ---------------------------------------------------------------------------------------------------------
  // API

  class ApiError extends Error {
    constructor(message, status) {
      super(message);
      this.status = status;
    }
  }

  async function api(path, params) {
    const url = new URL(path, window.location.origin);
    for (const [key, value] of Object.entries(params || {})) {
      if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, value);
    }
    const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    let body = null;
    try {
      body = await response.json();
    } catch (_) {
      body = null;
    }
    if (!response.ok) throw new ApiError((body && body.error) || `HTTP ${response.status}`, response.status);
    return body;
  }

  let busy = 0;
  function setBusy(delta, text) {
    busy = Math.max(0, busy + delta);
    const status = $("status");
    status.textContent = busy ? text || "Loading…" : "";
    status.classList.toggle("busy", busy > 0);
  }

  function showError(error) {
    $("error-text").textContent = error instanceof ApiError ? `${error.message} (HTTP ${error.status})` : String(error && error.message ? error.message : error);
    $("error-banner").hidden = false;
  }

  function hideError() {
    $("error-banner").hidden = true;
  }

  async function withBusy(text, work) {
    setBusy(+1, text);
    try {
      hideError();
      return await work();
    } catch (error) {
      showError(error);
      return undefined;
    } finally {
      setBusy(-1);
    }
  }

  // ---------------------------------------------------------------------------------------------------------
  // views

  const state = {
    overview: null,
    stream: null, // the last /api/stream answer
    streamNodes: new Map(), // "N1:id" -> ConsciousnessNode
    graphNodes: new Map(), // "N1:id" -> GraphNode
    selected: null,
    requestSeq: 0,
    historyTarget: null,
  };

  function showView(name) {
    for (const view of ["stream", "history", "state"]) {
      $(`view-${view}`).hidden = view !== name;
      $(`tab-${view}`).setAttribute("aria-selected", String(view === name));
    }
    if (name === "stream" && state.stream) graph.fitSoon();
  }

  function fillCitizenSelect(select, citizens, preferred) {
    const previous = select.value;
    clear(select);
    for (const c of citizens) {
      select.appendChild(el("option", { value: c.citizen }, `${c.citizen} (${c.memories} memories)`));
    }
    const wanted = [previous, preferred, "ada"].find((v) => v && citizens.some((c) => c.citizen === v));
    if (wanted) select.value = wanted;
  }

  async function loadOverview() {
    const overview = await withBusy("Loading the memory…", () => api("/api/overview"));
    if (!overview) return;
    state.overview = overview;
    const citizens = overview.citizens || [];
    for (const id of ["citizen", "find-citizen", "state-citizen"]) fillCitizenSelect($(id), citizens);
    if (!$("question").value && overview.demo_query && citizens.some((c) => c.citizen === "ada")) {
      $("question").value = overview.demo_query;
    }
    const box = clear($("overview"));
    const rows = el("table", { class: "table compact" },
      el("thead", null, el("tr", null, el("th", null, "graph"), el("th", null, "memories"), el("th", null, "links"))));
    const body = el("tbody");
    for (const level of overview.levels || []) {
      body.appendChild(el("tr", null, el("td", null, levelTag(level.level), " ", level.graph), el("td", { class: "num" }, String(level.memories)), el("td", { class: "num" }, String(level.relationships))));
    }
    for (const c of citizens) {
      body.appendChild(el("tr", null, el("td", null, levelTag("N1"), " ", c.citizen), el("td", { class: "num" }, String(c.memories)), el("td", { class: "num" }, String(c.relationships))));
    }
    rows.appendChild(body);
    box.appendChild(rows);
    if (!citizens.length) box.appendChild(el("p", { class: "muted small" }, "No citizen yet: ingest memories first (llama-consciousness ingest FILE)."));
  }

  // -- the stream ---------------------------------------------------------------------------------------

  function onModeChange() {
    const mode = $("mode").value;
    $("as-of-row").hidden = mode !== "point_in_time";
    $("range-row").hidden = !(mode === "evolution" || mode === "full_history");
  }

  function streamParams() {
    const mode = $("mode").value;
    const levels = Array.from(document.querySelectorAll('input[name="level"]:checked')).map((box) => box.value);
    return {
      citizen: $("citizen").value,
      q: $("question").value.trim(),
      mode,
      levels: levels.join(","),
      budget: $("budget").value,
      as_of: mode === "point_in_time" ? $("as-of").value : "",
      range_start: mode === "evolution" || mode === "full_history" ? $("range-start").value : "",
      range_end: mode === "evolution" || mode === "full_history" ? $("range-end").value : "",
    };
  }

  async function ask(event) {
    if (event) event.preventDefault();
    const params = streamParams();
    if (!params.levels) {
      showError("Pick at least one level.");
      return;
    }
    const seq = ++state.requestSeq;
    $("ask").disabled = true;
    try {
      const answer = await withBusy("Retrieving the stream…", () => api("/api/stream", params));
      if (!answer || seq !== state.requestSeq) return;
      renderStream(answer);
    } finally {
      if (seq === state.requestSeq) $("ask").disabled = false;
    }
  }

  function renderStream(answer) {
    state.stream = answer;
    const stream = answer.stream;
    state.streamNodes = new Map();
    for (const tier of TIERS) {
      for (const node of (stream.activation_tiers || {})[tier] || []) state.streamNodes.set(`${levelOf(node)}:${node.node_id}`, node);
    }
    for (const results of Object.values(stream.levels || {})) {
      for (const part of ["vector_results", "graph_results", "keyword_results"]) {
        for (const node of results[part] || []) {
          const key = `${levelOf(node)}:${node.node_id}`;
          if (!state.streamNodes.has(key)) state.streamNodes.set(key, node);
        }
      }
    }
    $("stream-empty").hidden = true;
    $("stream-result").hidden = false;
    closeNodePanel();
    renderSummary(answer);
    renderTiers(stream);
    graph.render(stream.traversal_graph);
    renderDissonances($("dissonances"), $("dissonance-count"), stream.temporal_dissonances || []);
    renderPaths(stream.traversal_graph);
    renderConstellation(stream.constellation);
    renderContext(answer.context);
  }

  function renderSummary(answer) {
    const stream = answer.stream;
    const s = stream.consciousness_summary || {};
    const box = clear($("summary"));
    const req = answer.request;
    const modeText = req.mode + (req.as_of ? ` as of ${fmtTime(req.as_of)}` : "") + (req.range_start || req.range_end ? ` ${fmtTime(req.range_start)} → ${fmtTime(req.range_end)}` : "");
    box.appendChild(el("div", { class: "summary-query" },
      el("span", { class: "query-text" }, `“${req.q}”`),
      el("span", { class: "query-meta" }, badge(`citizen ${req.citizen}`, "info"), badge(modeText.replace(/_/g, " ")), req.levels.map(levelTag)),
      el("span", { class: "themes", title: "emotional themes" }, el("span", { class: "themes-label" }, "themes"), (s.emotional_themes || []).map((t) => el("span", { class: "chip" }, t)))));
    const stat = (label, value, title) => el("div", { class: "stat", title: title || label }, el("span", { class: "stat-value" }, value), el("span", { class: "stat-label" }, label));
    box.appendChild(stat("memories", String(s.total_results ?? 0)));
    for (const level of LEVELS) {
      const count = s[`${level.toLowerCase()}_result_count`] ?? 0;
      box.appendChild(el("div", { class: "stat" }, el("span", { class: "stat-value" }, levelTag(level), " ", String(count)), el("span", { class: "stat-label" }, LEVEL_NAMES[level])));
    }
    box.appendChild(stat("dominant energy", num(s.dominant_energy)));
    box.appendChild(stat("avg confidence", num(s.confidence_average)));
    box.appendChild(stat("energy feedback", num(stream.energy_feedback_potential), "energy feedback potential"));
    if (stream.metadata_validation) box.appendChild(stat("metadata", String(stream.metadata_validation.quality_grade), `metadata quality (average completeness ${num(stream.metadata_validation.average_completeness)})`));
    box.appendChild(stat("latency", `${stream.retrieval_latency_ms ?? Math.round(answer.elapsed_ms)} ms`, `${stream.query_count} queries`));

    const errors = Object.entries(stream.levels || {}).filter(([, v]) => v.error);
    const errorBox = clear($("level-errors"));
    errorBox.hidden = !errors.length;
    for (const [key, value] of errors) errorBox.appendChild(el("p", null, `${key}: ${value.error} (partial answer)`));
  }

  function memoryCard(node, tier) {
    const level = levelOf(node);
    const gid = `${level}:${node.node_id}`;
    const past = node.expired_at != null;
    const head = el("div", { class: "card-head" },
      levelTag(level),
      el("span", { class: "card-name" }, node.name),
      el("span", { class: "type-tag" }, node.node_type),
      node.forgotten_at ? forgottenBadge(node) : past ? badge("past", "past") : null,
      node.possibly_superseded_by ? badge("possibly outdated", "warn") : null,
      node.injection_suspected ? badge("untrusted", "danger") : null);
    const text = (node.description || "").trim();
    const card = el("li", { class: `memory-card tier-border-${tier}${past ? " is-past" : ""}${node.forgotten_at ? " is-forgotten" : ""}`, tabindex: "0", "data-gid": gid, title: "Show details" },
      head,
      text && text !== node.name ? el("p", { class: "card-text" }, text) : null,
      el("div", { class: "card-meta" },
        meter("energy", node.energy, "energy"),
        meter("confidence", node.confidence, "confidence"),
        el("span", { class: "score", title: `retrieval source ${node.retrieval_source}` }, `${node.retrieval_source} · ${num(node.relevance_score, 3)}`)),
      emotionChips(node.emotion_vector),
      el("div", { class: "card-foot muted small" }, `valid ${fmtDay(node.valid_at)} → ${node.invalid_at ? fmtDay(node.invalid_at) : "now"}`, node.goal ? ` · goal ${node.goal}` : "", ` · ${node.resolution_state}`));
    const open = () => openNode(gid);
    card.addEventListener("click", open);
    card.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") {
        e.preventDefault();
        open();
      }
    });
    return card;
  }

  function renderTiers(stream) {
    for (const tier of TIERS) {
      const nodes = (stream.activation_tiers || {})[tier] || [];
      const panel = $(`tier-${tier}`);
      panel.querySelector("[data-count]").textContent = String(nodes.length);
      const list = clear(panel.querySelector("[data-list]"));
      if (!nodes.length) list.appendChild(el("li", { class: "muted small empty" }, "none"));
      for (const node of nodes) list.appendChild(memoryCard(node, tier));
    }
  }

  function dissonanceItem(d) {
    const wrong = d.dissonance_type === "discovered_false";
    return el("li", { class: "dissonance" },
      el("div", { class: "card-head" },
        el("span", { class: "card-name" }, d.node_name),
        badge(wrong ? "I was wrong" : "reality changed", wrong ? "danger" : "info"),
        d.confirmed === false ? badge("possible", "warn") : null),
      el("div", { class: "belief was" }, el("span", { class: "belief-label" }, "was"), el("span", null, d.original_belief)),
      el("div", { class: "belief now" }, el("span", { class: "belief-label" }, d.confirmed === false ? "maybe now" : "now"), el("span", null, d.corrected_belief)),
      el("div", { class: "muted small" }, `held ${fmtDay(d.belief_held_from)} → ${fmtDay(d.belief_held_until)} · corrected ${fmtDay(d.corrected_at)} · discovery energy ${num(d.discovery_energy)}`),
      d.correction_trigger ? el("div", { class: "muted small" }, d.correction_trigger) : null,
      emotionChips(d.discovery_emotions));
  }

  function renderDissonances(list, counter, items) {
    clear(list);
    counter.textContent = String(items.length);
    if (!items.length) list.appendChild(el("li", { class: "muted small empty" }, "No corrected belief in this window (try evolution or full history)."));
    for (const d of items) list.appendChild(dissonanceItem(d));
  }

  function renderPaths(traversal) {
    const list = clear($("paths"));
    const paths = (traversal && traversal.suggested_paths) || [];
    $("path-count").textContent = String(paths.length);
    if (!paths.length) list.appendChild(el("li", { class: "muted small empty" }, "No path."));
    const names = new Map(((traversal && traversal.nodes) || []).map((n) => [n.node_id, n.content]));
    for (const path of paths) {
      const steps = el("div", { class: "path-steps" });
      path.path_nodes.forEach((gid, i) => {
        if (i) steps.appendChild(el("span", { class: "arrow" }, "→"));
        steps.appendChild(el("span", { class: "step" }, levelTag(splitGraphId(gid).level), " ", truncate(names.get(gid) || gid, 40)));
      });
      const item = el("li", { class: "path", tabindex: "0", "data-path": path.path_id, title: "Highlight in the graph" },
        el("div", { class: "card-head" }, el("span", { class: "card-name" }, path.path_narrative), el("span", { class: "muted small" }, `p ${num(path.traversal_probability, 3)}`)),
        steps,
        el("div", { class: "muted small" }, `activation ${num(path.total_activation)} · coherence ${num(path.semantic_coherence)} · emotional consistency ${num(path.emotional_consistency)}`));
      const toggle = () => {
        const on = !item.classList.contains("active");
        for (const other of list.querySelectorAll(".path.active")) other.classList.remove("active");
        item.classList.toggle("active", on);
        graph.highlightPath(on ? path : null);
      };
      item.addEventListener("click", toggle);
      item.addEventListener("keydown", (e) => {
        if (e.key === "Enter") toggle();
      });
      list.appendChild(item);
    }
  }

  function constellationMember(member) {
    const gid = member.level ? `${member.level}:${member.node_id}` : null;
    const item = el("li", { class: "member" + (gid ? " clickable" : ""), "data-gid": gid },
      member.level ? levelTag(member.level) : null, " ",
      el("span", { class: "card-name" }, member.name),
      member.score != null ? el("span", { class: "muted small" }, ` score ${num(member.score, 3)}`) : null,
      member.link_energy != null ? el("span", { class: "muted small" }, ` · link energy ${num(member.link_energy)}`) : null,
      member.retrieved === false ? badge("from the graph", "info") : null);
    if (gid) item.addEventListener("click", () => openNode(gid));
    return item;
  }

  function renderConstellation(c) {
    const box = clear($("constellation"));
    if (!c || !c.primary) {
      box.appendChild(el("p", { class: "muted small" }, "No constellation."));
      return;
    }
    box.appendChild(el("div", { class: "constellation-group c-primary" }, el("h3", null, "Primary"), el("ul", { class: "members" }, constellationMember(c.primary))));
    for (const [key, title, kind] of [["supporting", "Supporting", "c-support"], ["contradicting", "Contradicting", "c-contradict"]]) {
      const members = c[key] || [];
      box.appendChild(el("div", { class: `constellation-group ${kind}` }, el("h3", null, `${title} (${members.length})`),
        members.length ? el("ul", { class: "members" }, members.map(constellationMember)) : el("p", { class: "muted small" }, "none")));
    }
    if (c.synthesis) box.appendChild(el("div", { class: "constellation-group" }, el("h3", null, "Synthesis"), el("p", { class: "synthesis" }, c.synthesis)));
  }

  function renderContext(ctx) {
    $("context-tokens").textContent = `${ctx.tokens} / ${ctx.budget} tokens`;
    $("context-tokens").setAttribute("data-tokens", String(ctx.tokens));
    $("context-meta").textContent = `${ctx.included.length} memories included` + (ctx.left_out.length ? `, ${ctx.left_out.length} left out by the budget` : "");
    $("context-text").textContent = ctx.text;
  }

  // -- the node panel -------------------------------------------------------------------------------------

  function closeNodePanel() {
    $("node-panel").hidden = true;
    state.selected = null;
    graph.select(null);
  }

  function openNode(gid) {
    const { level, id } = splitGraphId(gid);
    const gnode = state.graphNodes.get(gid);
    const snode = state.streamNodes.get(gid);
    state.selected = gid;
    graph.select(gid);
    $("node-panel").hidden = false;
    $("node-title").textContent = (snode && snode.name) || (gnode && gnode.content) || id;
    const body = clear($("node-body"));
    const hubs = new Set((state.stream && state.stream.stream.traversal_graph && state.stream.stream.traversal_graph.hub_nodes) || []);
    body.appendChild(el("div", { class: "badges" },
      levelTag(level),
      gnode ? badge(gnode.activation_tier, `tier-${gnode.activation_tier}`) : null,
      badge((gnode && gnode.node_type) || (snode && snode.node_type) || "Memory"),
      hubs.has(gid) ? badge("hub", "info") : null,
      (snode && snode.expired_at) || (gnode && gnode.expired_at) ? badge("past", "past") : badge("current", "ok")));
    if (snode && snode.description) body.appendChild(el("p", { class: "node-text" }, snode.description));
    const src = snode || gnode || {};
    const metrics = el("div", { class: "metrics" });
    if (gnode) metrics.appendChild(meter("activation", gnode.activation_score, "activation"));
    metrics.appendChild(meter("energy", src.energy, "energy"));
    metrics.appendChild(meter("confidence", src.confidence, "confidence"));
    body.appendChild(metrics);
    const chips = emotionChips(src.emotion_vector, 6);
    if (chips) body.appendChild(chips);
    body.appendChild(kv([
      ["id", el("span", { class: "mono" }, id)],
      ["valid", `${fmtTime(src.valid_at)} → ${src.invalid_at ? fmtTime(src.invalid_at) : "now"}`],
      ["believed", `${fmtTime(src.created_at)} → ${src.expired_at ? fmtTime(src.expired_at) : "now"}`],
      ["retrieved by", snode ? `${snode.retrieval_source} (${num(snode.relevance_score, 3)})` : "the graph (connector)"],
      ["goal", snode && snode.goal],
      ["mindstate", snode && snode.mindstate],
      ["felt", snode && snode.felt_quality],
      ["trigger", snode && snode.formation_trigger],
      ["state", snode && snode.resolution_state],
      ["concepts", snode && snode.concepts && snode.concepts.length ? snode.concepts.join(", ") : null],
    ]));
    const versions = clear($("node-versions"));
    versions.appendChild(el("p", { class: "muted small" }, "Loading versions…"));
    const citizen = level === "N1" ? state.stream && state.stream.request.citizen : null;
    state.historyTarget = { id, level, citizen };
    const wanted = gid;
    withBusy("Loading the memory's versions…", () => api("/api/memory", { id, level, citizen })).then((history) => {
      if (state.selected !== wanted) return;
      clear(versions);
      if (!history) {
        versions.appendChild(el("p", { class: "muted small" }, "Could not load the versions."));
        return;
      }
      $("node-title").textContent = history.memory.name;
      if (!snode && history.memory.description) body.insertBefore(el("p", { class: "node-text" }, history.memory.description), body.children[1] || null);
      versions.appendChild(miniTimeline(history));
    });
  }

  function miniTimeline(history) {
    const list = el("ol", { class: "mini-versions" });
    for (const v of history.versions) {
      const why = v.why_superseded;
      list.appendChild(el("li", { class: `version${v.current ? " current" : " past"}${v.node_id === history.node_id ? " this" : ""}` },
        el("div", { class: "version-head" },
          el("span", { class: "version-date" }, fmtTime(v.created_at)),
          v.forgotten_at ? forgottenBadge(v) : v.current ? badge("current", "ok") : badge("superseded", "past"),
          v.node_id === history.node_id ? badge("this one", "info") : null),
        el("div", { class: "version-text" }, v.description || v.name),
        why ? el("div", { class: "muted small" }, supersededText(why)) : null));
    }
    return list;
  }

  // A memory taken back with memory.forget: greyed, with why (and who asked) on the badge.
  function forgottenBadge(node) {
    const reason = String(node.forgotten_reason || "no reason").replace(/_/g, " ");
    const b = badge(`forgotten: ${reason}`, "forgotten");
    b.title = `forgotten ${fmtTime(node.forgotten_at)}${node.forgotten_by ? ` by ${node.forgotten_by}` : ""}`;
    return b;
  }

  function supersededText(why) {
    const parts = [];
    if (why.superseded_by) parts.push(`superseded by ${why.superseded_by}`);
    else if (why.possibly_superseded_by) parts.push(`possibly superseded by ${why.possibly_superseded_by}`);
    if (why.expired_at) parts.push(`on ${fmtTime(why.expired_at)}`);
    const reason = why.invalidation_reason || why.reason;
    if (reason) parts.push(`reason: ${reason.replace(/_/g, " ")}`);
    if (why.source) parts.push(`decided by ${why.source}${why.confidence != null ? ` (${num(why.confidence)})` : ""}`);
    return parts.join(" · ") || "no longer believed";
  }

  // ---------------------------------------------------------------------------------------------------------
  // the traversal graph: a deterministic force-directed layout, pan and zoom

  const graph = (() => {
    const svgEl = () => $("graph");
    const viewport = () => $("viewport");
    let view = { x: 0, y: 0, k: 1 };
    let bounds = null;
    let positions = new Map();
    let current = null;
    let userMoved = false;
    let lastSize = null;

    function applyView() {
      const root = viewport();
      root.setAttribute("transform", `translate(${view.x.toFixed(2)},${view.y.toFixed(2)}) scale(${view.k.toFixed(4)})`);
      // labels stay readable when zoomed out: at least ~10 px on screen (CSSOM, allowed by the page's CSP)
      root.style.setProperty("--label-size", `${Math.min(24, Math.max(11.5, 10.5 / view.k)).toFixed(2)}px`);
      root.style.setProperty("--edge-label-size", `${Math.min(20, Math.max(9.5, 9.5 / view.k)).toFixed(2)}px`);
    }

    function size() {
      const rect = svgEl().getBoundingClientRect();
      return { w: rect.width || 800, h: rect.height || 520 };
    }

    function fit() {
      if (!bounds) return;
      userMoved = false;
      const { w, h } = size();
      lastSize = { w, h };
      const bw = Math.max(bounds.maxX - bounds.minX, 1);
      const bh = Math.max(bounds.maxY - bounds.minY, 1);
      const k = Math.min((w - 40) / bw, (h - 40) / bh, 1.6);
      view = { k, x: w / 2 - k * (bounds.minX + bw / 2), y: h / 2 - k * (bounds.minY + bh / 2) };
      applyView();
    }

    function fitSoon() {
      window.requestAnimationFrame(fit);
    }

    function onResize() {
      if (!svgEl().getBoundingClientRect().width) return; // hidden: nothing to fit
      const { w, h } = size();
      if (!current || !lastSize || (w === lastSize.w && h === lastSize.h)) return;
      if (!userMoved) {
        fit();
        return;
      }
      view = { ...view, x: view.x + (w - lastSize.w) / 2, y: view.y + (h - lastSize.h) / 2 };
      lastSize = { w, h };
      applyView();
    }

    function zoomAt(cx, cy, factor) {
      userMoved = true;
      const k = Math.max(0.1, Math.min(8, view.k * factor));
      const f = k / view.k;
      view = { k, x: cx - (cx - view.x) * f, y: cy - (cy - view.y) * f };
      applyView();
    }

    function zoomCentre(factor) {
      const { w, h } = size();
      zoomAt(w / 2, h / 2, factor);
    }

    // Fruchterman-Reingold from a deterministic start (tiers on rings), so the same stream draws the same
    function layout(nodes, edges) {
      const pos = new Map();
      const byTier = { focus: [], peripheral: [], background: [] };
      for (const n of nodes) (byTier[n.activation_tier] || byTier.background).push(n);
      const ring = { focus: 90, peripheral: 230, background: 340 };
      for (const tier of TIERS) {
        const list = byTier[tier];
        list.forEach((n, i) => {
          const angle = (2 * Math.PI * i) / Math.max(list.length, 1) + (tier === "peripheral" ? 0.3 : tier === "background" ? 0.6 : 0);
          const r = list.length === 1 && tier === "focus" ? 0 : ring[tier];
          pos.set(n.node_id, { x: r * Math.cos(angle), y: r * Math.sin(angle) });
        });
      }
      const ids = nodes.map((n) => n.node_id);
      const links = edges.filter((e) => pos.has(e.source_id) && pos.has(e.target_id) && e.source_id !== e.target_id);
      const ideal = 90;
      const cutoff = 2.2 * ideal;
      const gravity = 0.09;
      let temperature = 80;
      const iterations = 320;
      for (let it = 0; it < iterations; it++) {
        const disp = new Map(ids.map((id) => [id, { x: 0, y: 0 }]));
        for (let i = 0; i < ids.length; i++) {
          const a = pos.get(ids[i]);
          for (let j = i + 1; j < ids.length; j++) {
            const b = pos.get(ids[j]);
            let dx = a.x - b.x;
            let dy = a.y - b.y;
            let d = Math.hypot(dx, dy);
            if (d < 0.01) {
              dx = 0.01 * (i - j);
              dy = 0.01;
              d = Math.hypot(dx, dy);
            }
            if (d > cutoff) continue; // far memories do not push: components stay together under gravity
            const force = (ideal * ideal) / d;
            const fx = (dx / d) * force;
            const fy = (dy / d) * force;
            disp.get(ids[i]).x += fx;
            disp.get(ids[i]).y += fy;
            disp.get(ids[j]).x -= fx;
            disp.get(ids[j]).y -= fy;
          }
        }
        for (const e of links) {
          const a = pos.get(e.source_id);
          const b = pos.get(e.target_id);
          const dx = a.x - b.x;
          const dy = a.y - b.y;
          const d = Math.max(Math.hypot(dx, dy), 0.01);
          const force = (d * d) / ideal;
          const fx = (dx / d) * force;
          const fy = (dy / d) * force;
          disp.get(e.source_id).x -= fx;
          disp.get(e.source_id).y -= fy;
          disp.get(e.target_id).x += fx;
          disp.get(e.target_id).y += fy;
        }
        for (const id of ids) {
          const p = pos.get(id);
          const dsp = disp.get(id);
          dsp.x -= p.x * gravity; // gravity: disconnected memories stay near
          dsp.y -= p.y * gravity;
          const d = Math.hypot(dsp.x, dsp.y);
          if (d > 0) {
            const step = Math.min(d, temperature);
            p.x += (dsp.x / d) * step;
            p.y += (dsp.y / d) * step;
          }
        }
        temperature = Math.max(1, temperature * 0.985);
      }
      // then move apart memories whose labels (centred under them) would overlap
      const half = new Map(nodes.map((n) => [n.node_id, Math.max(radiusOf(n), truncate(n.content, 28).length * 3.8) + 6]));
      const radius = new Map(nodes.map((n) => [n.node_id, radiusOf(n)]));
      for (let pass = 0; pass < 60; pass++) {
        let moved = false;
        for (let i = 0; i < ids.length; i++) {
          for (let j = i + 1; j < ids.length; j++) {
            const a = pos.get(ids[i]);
            const b = pos.get(ids[j]);
            // each memory's box: its circle above, its label below (y - r .. y + r + 20)
            const dx = b.x - a.x;
            const dy = b.y - a.y;
            const overlapX = half.get(ids[i]) + half.get(ids[j]) - Math.abs(dx);
            const upper = dy >= 0 ? ids[i] : ids[j];
            const lower = dy >= 0 ? ids[j] : ids[i];
            const overlapY = radius.get(upper) + 22 + radius.get(lower) + 4 - Math.abs(dy);
            if (overlapX <= 0 || overlapY <= 0) continue;
            moved = true;
            if (overlapY < overlapX) {
              const push = (overlapY / 2 + 0.5) * (dy >= 0 ? 1 : -1);
              a.y -= push;
              b.y += push;
            } else {
              const push = (overlapX / 2 + 0.5) * (dx >= 0 ? 1 : -1);
              a.x -= push;
              b.x += push;
            }
          }
        }
        if (!moved) break;
      }
      return pos;
    }

    function radiusOf(n) {
      return 9 + 13 * Math.max(0, Math.min(1, n.activation_score || 0));
    }

    function render(traversal) {
      current = traversal;
      const root = clear(viewport());
      state.graphNodes = new Map();
      const nodes = (traversal && traversal.nodes) || [];
      const edges = (traversal && traversal.edges) || [];
      $("graph-stats").textContent = traversal
        ? `${traversal.node_count} memories · ${traversal.edge_count} links · density ${num(traversal.graph_density)}`
        : "no traversal graph";
      if (!nodes.length) {
        bounds = { minX: -100, maxX: 100, minY: -20, maxY: 20 };
        root.appendChild(svg("text", { class: "graph-empty", x: 0, y: 0, "text-anchor": "middle" }, "No memories to draw"));
        fit();
        return;
      }
      for (const n of nodes) state.graphNodes.set(n.node_id, n);
      positions = layout(nodes, edges);
      const hubs = new Set(traversal.hub_nodes || []);
      const edgeLayer = svg("g", { class: "edges" });
      const labelLayer = svg("g", { class: "edge-labels" });
      const nodeLayer = svg("g", { class: "nodes" });
      root.append(edgeLayer, labelLayer, nodeLayer);

      edges.forEach((e, index) => {
        const a = positions.get(e.source_id);
        const b = positions.get(e.target_id);
        if (!a || !b || e.source_id === e.target_id) return;
        const dx = b.x - a.x;
        const dy = b.y - a.y;
        const len = Math.hypot(dx, dy) || 1;
        const cx = (a.x + b.x) / 2 - (dy / len) * 18;
        const cy = (a.y + b.y) / 2 + (dx / len) * 18;
        const ex = b.x - cx;
        const ey = b.y - cy;
        const elen = Math.hypot(ex, ey) || 1;
        const r = radiusOf(state.graphNodes.get(e.target_id)) + 3;
        const tx = b.x - (ex / elen) * r;
        const ty = b.y - (ey / elen) * r;
        const weight = Math.max(0, Math.min(1, e.traversal_weight || 0));
        const path = svg("path", {
          class: "edge",
          d: `M ${a.x.toFixed(1)} ${a.y.toFixed(1)} Q ${cx.toFixed(1)} ${cy.toFixed(1)} ${tx.toFixed(1)} ${ty.toFixed(1)}`,
          "stroke-width": (1 + 3.5 * weight).toFixed(2),
          "stroke-opacity": (0.3 + 0.6 * weight).toFixed(2),
          "marker-end": "url(#arrow)",
          "data-source": e.source_id,
          "data-target": e.target_id,
          "data-edge": e.edge_id || `edge_${index}`,
        }, svg("title", null, `${e.relation_type} · traversal weight ${num(weight)} · goal: ${e.goal} · mindstate: ${e.mindstate} · ${e.resolution_state}`));
        edgeLayer.appendChild(path);
        const lx = 0.25 * a.x + 0.5 * cx + 0.25 * b.x;
        const ly = 0.25 * a.y + 0.5 * cy + 0.25 * b.y;
        labelLayer.appendChild(svg("text", {
          class: "edge-label", x: lx.toFixed(1), y: ly.toFixed(1), "text-anchor": "middle",
          "data-source": e.source_id, "data-target": e.target_id, "data-edge": e.edge_id || `edge_${index}`,
        }, `${e.relation_type} ${num(weight)}`));
      });

      for (const n of nodes) {
        const p = positions.get(n.node_id);
        const r = radiusOf(n);
        const { level } = splitGraphId(n.node_id);
        const past = n.expired_at != null;
        const group = svg("g", {
          class: `node tier-${n.activation_tier} level-${level}${hubs.has(n.node_id) ? " hub" : ""}${past ? " past" : ""}`,
          transform: `translate(${p.x.toFixed(1)},${p.y.toFixed(1)})`,
          tabindex: "0",
          role: "button",
          "data-id": n.node_id,
          "aria-label": `${n.content} (${n.activation_tier}, ${level})`,
        },
        svg("title", null, `${n.content}\n${n.node_type} · ${n.activation_tier} · activation ${num(n.activation_score)} · energy ${num(n.energy)} · confidence ${num(n.confidence)}`),
        hubs.has(n.node_id) ? svg("circle", { class: "hub-halo", r: (r + 6).toFixed(1) }) : null,
        svg("circle", { class: "node-circle", r: r.toFixed(1) }),
        svg("text", { class: "node-level", "text-anchor": "middle", dy: "0.35em" }, level || ""),
        svg("text", { class: "node-label", "text-anchor": "middle", y: (r + 14).toFixed(1) }, truncate(n.content, 28)));
        group.addEventListener("click", (event) => {
          event.stopPropagation();
          openNode(n.node_id);
        });
        group.addEventListener("keydown", (event) => {
          if (event.key === "Enter" || event.key === " ") {
            event.preventDefault();
            openNode(n.node_id);
          }
        });
        nodeLayer.appendChild(group);
      }
      let minX = Infinity;
      let maxX = -Infinity;
      let minY = Infinity;
      let maxY = -Infinity;
      for (const n of nodes) {
        const p = positions.get(n.node_id);
        const r = radiusOf(n);
        minX = Math.min(minX, p.x - Math.max(r, 70));
        maxX = Math.max(maxX, p.x + Math.max(r, 70));
        minY = Math.min(minY, p.y - r - 8);
        maxY = Math.max(maxY, p.y + r + 20);
      }
      bounds = { minX, maxX, minY, maxY };
      fit();
    }

    function select(gid) {
      const root = viewport();
      for (const node of root.querySelectorAll(".node.selected")) node.classList.remove("selected");
      for (const item of root.querySelectorAll(".edge.active, .edge-label.active")) {
        item.classList.remove("active");
        if (item.classList.contains("edge")) item.setAttribute("marker-end", "url(#arrow)");
      }
      root.classList.toggle("has-selection", Boolean(gid));
      if (!gid) return;
      for (const node of root.querySelectorAll(".node")) {
        if (node.getAttribute("data-id") === gid) node.classList.add("selected");
      }
      for (const item of root.querySelectorAll(".edge, .edge-label")) {
        if (item.getAttribute("data-source") === gid || item.getAttribute("data-target") === gid) {
          item.classList.add("active");
          if (item.classList.contains("edge")) item.setAttribute("marker-end", "url(#arrow-active)");
        }
      }
    }

    function highlightPath(path) {
      const root = viewport();
      for (const item of root.querySelectorAll(".on-path")) item.classList.remove("on-path");
      root.classList.toggle("has-path", Boolean(path));
      if (!path) return;
      const nodes = new Set(path.path_nodes);
      const edges = new Set(path.path_edges);
      for (const node of root.querySelectorAll(".node")) if (nodes.has(node.getAttribute("data-id"))) node.classList.add("on-path");
      for (const item of root.querySelectorAll(".edge, .edge-label")) if (edges.has(item.getAttribute("data-edge"))) item.classList.add("on-path");
    }

    function install() {
      const s = svgEl();
      s.addEventListener("wheel", (event) => {
        event.preventDefault();
        const rect = s.getBoundingClientRect();
        const delta = event.deltaMode === 1 ? event.deltaY * 16 : event.deltaY;
        zoomAt(event.clientX - rect.left, event.clientY - rect.top, Math.exp(-delta * 0.0015));
      }, { passive: false });
      let drag = null;
      s.addEventListener("pointerdown", (event) => {
        if (event.button !== 0 || event.target.closest(".node")) return;
        drag = { x: event.clientX, y: event.clientY, vx: view.x, vy: view.y, moved: false, id: event.pointerId };
        s.setPointerCapture(event.pointerId);
        s.classList.add("panning");
      });
      s.addEventListener("pointermove", (event) => {
        if (!drag || event.pointerId !== drag.id) return;
        const dx = event.clientX - drag.x;
        const dy = event.clientY - drag.y;
        if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
        view = { ...view, x: drag.vx + dx, y: drag.vy + dy };
        if (drag.moved) userMoved = true;
        applyView();
      });
      const end = (event) => {
        if (!drag || event.pointerId !== drag.id) return;
        const clicked = !drag.moved;
        drag = null;
        s.classList.remove("panning");
        if (clicked && event.type === "pointerup") closeNodePanel(); // a click on the background deselects
      };
      s.addEventListener("pointerup", end);
      s.addEventListener("pointercancel", end);
      $("zoom-in").addEventListener("click", () => zoomCentre(1.25));
      $("zoom-out").addEventListener("click", () => zoomCentre(0.8));
      $("zoom-fit").addEventListener("click", fit);
      if (window.ResizeObserver) new ResizeObserver(() => onResize()).observe(s);
      else window.addEventListener("resize", onResize);
    }

    return { render, select, highlightPath, install, fit, fitSoon, view: () => ({ ...view }) };
  })();

  // ---------------------------------------------------------------------------------------------------------
  // a memory's history

  function onFindLevelChange() {
    $("find-citizen-row").hidden = $("find-level").value !== "N1";
  }

  async function find(event) {
    if (event) event.preventDefault();
    const level = $("find-level").value;
    const params = { level, text: $("find-text").value.trim(), citizen: level === "N1" ? $("find-citizen").value : "" };
    const answer = await withBusy("Searching…", () => api("/api/find", params));
    const list = clear($("find-results"));
    if (!answer) return;
    if (!answer.memories.length) list.appendChild(el("li", { class: "muted small" }, "No memory matches."));
    for (const m of answer.memories) {
      const item = el("li", { class: "result", tabindex: "0", "data-id": m.node_id },
        el("div", { class: "card-head" }, levelTag(level), el("span", { class: "card-name" }, m.name), m.current ? badge("current", "ok") : badge("past", "past")),
        m.description ? el("div", { class: "muted small" }, truncate(m.description, 140)) : null,
        el("div", { class: "mono tiny" }, m.node_id));
      const open = () => openHistory({ id: m.node_id, level, citizen: params.citizen || null });
      item.addEventListener("click", open);
      item.addEventListener("keydown", (e) => {
        if (e.key === "Enter") open();
      });
      list.appendChild(item);
    }
  }

  async function openHistory(target) {
    showView("history");
    $("find-level").value = target.level;
    onFindLevelChange();
    if (target.citizen) $("find-citizen").value = target.citizen;
    const history = await withBusy("Loading the memory's history…", () => api("/api/memory", target));
    if (!history) return;
    renderHistory(history);
  }

  function renderHistory(history) {
    $("history-empty").hidden = true;
    $("history-result").hidden = false;
    const memory = history.memory;
    $("history-title").textContent = memory.name;
    const badges = clear($("history-badges"));
    badges.append(levelTag(history.level), badge(memory.node_type),
      memory.forgotten_at ? forgottenBadge(memory) : memory.expired_at ? badge("past", "past") : badge("current", "ok"));
    if (history.citizen_id) badges.append(badge(`citizen ${history.citizen_id}`, "info"));
    $("history-id").textContent = history.node_id;

    const timeline = clear($("timeline"));
    $("history-version-count").textContent = String(history.versions.length);
    for (const v of history.versions) {
      const why = v.why_superseded;
      const item = el("li", { class: `tl-item${v.current ? " current" : " past"}${v.node_id === history.node_id ? " this" : ""}`, "data-id": v.node_id },
        el("span", { class: "tl-dot", "aria-hidden": "true" }),
        el("div", { class: "tl-when" },
          el("span", { class: "tl-date" }, fmtTime(v.created_at)),
          el("span", { class: "muted small" }, v.expired_at ? `believed until ${fmtTime(v.expired_at)}` : "believed now")),
        el("div", { class: "tl-card" },
          el("div", { class: "card-head" },
            el("span", { class: "card-name" }, v.name),
            v.forgotten_at ? forgottenBadge(v) : v.current ? badge("current", "ok") : badge("superseded", "past"),
            v.node_id === history.node_id ? badge("this version", "info") : null,
            v.possibly_superseded_by ? badge("possibly outdated", "warn") : null,
            v.injection_suspected ? badge("untrusted", "danger") : null),
          v.description ? el("p", { class: "card-text" }, v.description) : null,
          el("div", { class: "card-meta" }, meter("energy", v.energy, "energy"), meter("confidence", v.confidence, "confidence"),
            el("span", { class: "score" }, `used ${v.access_count}×${v.last_accessed_at ? `, last ${fmtTime(v.last_accessed_at)}` : ""}`)),
          emotionChips(v.emotion_vector),
          kv([
            ["valid", `${fmtTime(v.valid_at)} → ${v.invalid_at ? fmtTime(v.invalid_at) : "now"}`],
            ["supersedes", v.supersedes ? el("span", { class: "mono" }, v.supersedes) : null],
            ["why it replaced", v.supersede_reason ? v.supersede_reason.replace(/_/g, " ") : null],
            ["correction", v.correction_pattern_id],
            ["discovery energy", v.discovery_energy != null ? num(v.discovery_energy) : null],
            ["goal", v.goal],
            ["mindstate", v.mindstate],
            ["felt", v.felt_quality],
            ["trigger", v.formation_trigger],
            ["id", el("span", { class: "mono" }, v.node_id)],
          ]),
          why ? el("div", { class: "why" }, el("strong", null, "Why superseded: "), supersededText(why)) : null));
      timeline.appendChild(item);
    }

    renderDissonances($("history-dissonances"), $("history-dissonance-count"), history.dissonances || []);

    const links = clear($("history-links"));
    $("history-link-count").textContent = String(history.links.length);
    if (!history.links.length) links.appendChild(el("li", { class: "muted small empty" }, "No link."));
    for (const link of history.links) {
      const out = link.direction === "outgoing";
      const item = el("li", { class: "link clickable", tabindex: "0" },
        el("div", { class: "card-head" },
          el("span", { class: "direction" }, out ? "→" : "←"),
          el("span", { class: "rel" }, link.relation_type || link.type || "LINK"),
          el("span", { class: "card-name" }, link.other_name || link.other_id)),
        el("div", { class: "muted small" }, [link.goal ? `goal ${link.goal}` : null, link.energy != null ? `energy ${num(link.energy)}` : null, link.confidence != null ? `confidence ${num(link.confidence)}` : null].filter(Boolean).join(" · ")));
      const open = () => openHistory({ id: link.other_id, level: history.level, citizen: history.citizen_id });
      item.addEventListener("click", open);
      item.addEventListener("keydown", (e) => {
        if (e.key === "Enter") open();
      });
      links.appendChild(item);
    }

    const uses = clear($("history-uses"));
    $("history-use-count").textContent = String(history.uses.length);
    if (!history.uses.length) uses.appendChild(el("li", { class: "muted small empty" }, "Not used yet (uses are recorded by memory.record_use)."));
    for (const use of history.uses) uses.appendChild(el("li", null, el("span", { class: "mono tiny" }, use.use_id), " ", el("span", { class: "muted small" }, fmtTime(use.at))));
  }

  // ---------------------------------------------------------------------------------------------------------
  // a citizen's state

  async function loadState(event) {
    if (event) event.preventDefault();
    const citizen = $("state-citizen").value;
    if (!citizen) return;
    const answer = await withBusy("Loading the state history…", () => api("/api/state", { citizen }));
    if (!answer) return;
    $("state-empty").hidden = true;
    $("state-result").hidden = false;
    const versions = answer.versions || [];
    $("state-count").textContent = `${versions.length} version${versions.length === 1 ? "" : "s"}`;
    drawStateChart(versions);
    const body = clear($("state-table").querySelector("tbody"));
    if (!versions.length) body.appendChild(el("tr", null, el("td", { colspan: "9", class: "muted" }, "No state recorded for this citizen (memory.update_citizen_state, or feedback).")));
    for (const v of versions) {
      body.appendChild(el("tr", { class: v.expired_at ? "corrected" : "" },
        el("td", null, fmtTime(v.valid_at)),
        el("td", null, v.invalid_at ? fmtTime(v.invalid_at) : "now"),
        el("td", null, meter("", v.energy, "energy")),
        el("td", null, emotionChips(v.emotion_vector, 4) || "—"),
        el("td", null, v.goal || "—"),
        el("td", null, v.mindstate || "—"),
        el("td", null, v.source),
        el("td", null, v.reason || "—"),
        el("td", null, fmtTime(v.created_at), v.expired_at ? el("div", { class: "muted small" }, `corrected ${fmtTime(v.expired_at)}`) : null)));
    }
  }

  function drawStateChart(versions) {
    const chart = clear($("state-chart"));
    const W = 900;
    const H = 240;
    const pad = { l: 44, r: 18, t: 14, b: 30 };
    chart.setAttribute("viewBox", `0 0 ${W} ${H}`);
    const live = versions.filter((v) => !v.expired_at);
    if (!live.length) {
      chart.appendChild(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "chart-empty" }, "No state recorded"));
      return;
    }
    const times = live.map((v) => new Date(v.valid_at).getTime());
    const now = Date.now();
    const t0 = Math.min(...times);
    const last = Math.max(...times);
    const day = 86400000;
    const t1 = Math.min(Math.max(now, last + day), last + Math.max((last - t0) * 0.15, day));
    const span = Math.max(t1 - t0, 1);
    const x = (t) => pad.l + ((t - t0) / span) * (W - pad.l - pad.r);
    const y = (e) => pad.t + (1 - e) * (H - pad.t - pad.b);
    for (const tick of [0, 0.25, 0.5, 0.75, 1]) {
      chart.appendChild(svg("line", { class: "grid", x1: pad.l, x2: W - pad.r, y1: y(tick), y2: y(tick) }));
      chart.appendChild(svg("text", { class: "axis", x: pad.l - 8, y: y(tick), dy: "0.35em", "text-anchor": "end" }, tick.toFixed(2)));
    }
    chart.appendChild(svg("text", { class: "axis", x: pad.l, y: H - 8 }, fmtDay(new Date(t0).toISOString())));
    chart.appendChild(svg("text", { class: "axis", x: x(last), y: H - 8, "text-anchor": "middle" }, fmtDay(new Date(last).toISOString())));
    chart.appendChild(svg("text", { class: "axis", x: W - pad.r, y: H - 8, "text-anchor": "end" }, "→ now"));
    let d = "";
    live.forEach((v, i) => {
      const tx = x(times[i]);
      const ty = y(v.energy);
      d += i ? ` H ${tx.toFixed(1)} V ${ty.toFixed(1)}` : `M ${tx.toFixed(1)} ${ty.toFixed(1)}`;
    });
    d += ` H ${x(t1).toFixed(1)}`;
    chart.appendChild(svg("path", { class: "energy-line", d }));
    for (const v of versions) {
      const t = new Date(v.valid_at).getTime();
      chart.appendChild(svg("circle", { class: v.expired_at ? "energy-dot corrected" : "energy-dot", cx: x(t).toFixed(1), cy: y(v.energy).toFixed(1), r: 5 },
        svg("title", null, `${fmtTime(v.valid_at)} · energy ${num(v.energy)}${v.goal ? ` · goal ${v.goal}` : ""}${v.reason ? ` · ${v.reason}` : ""}${v.expired_at ? " · corrected" : ""}`)));
    }
  }

  // ---------------------------------------------------------------------------------------------------------
  // start

  function start() {
    for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => showView(tab.getAttribute("data-view")));
    $("ask-form").addEventListener("submit", ask);
    $("mode").addEventListener("change", onModeChange);
    $("find-form").addEventListener("submit", find);
    $("find-level").addEventListener("change", onFindLevelChange);
    $("state-form").addEventListener("submit", loadState);
    $("state-citizen").addEventListener("change", () => loadState());
    $("node-close").addEventListener("click", closeNodePanel);
    $("node-open-history").addEventListener("click", () => {
      if (state.historyTarget) openHistory(state.historyTarget);
    });
    $("error-close").addEventListener("click", hideError);
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && !$("node-panel").hidden) closeNodePanel();
    });
    graph.install();
    onModeChange();
    onFindLevelChange();
    loadOverview();
  }

  // for tests and the curious: the current view of the graph
  window.llamaConsciousnessUI = Object.freeze({ graphView: () => graph.view() });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
