/* belieflens viewer: draws the page's inlined data (#bl-data) with plotly.js, no network.
 * One selection drives every view; see belieflens/report/viewer.py for what the data holds. */
(function () {
  "use strict";
  window.blAppStart = performance.now();
  const D = JSON.parse(document.getElementById("bl-data").textContent);
  const $ = (id) => document.getElementById(id);
  const PLOT = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["sendDataToCloud"] };
  /* Plotly's toolbar (mode bar) shows in a chart's top right corner while the pointer is over
     the chart: every chart is drawn through react(), which keeps that band free (the title
     sits just above the plot, below the band) and puts a horizontal legend at the chart's
     bottom edge, below the x-axis title rather than on it. */
  const TOOLBAR_PX = 30;
  function roomy(layout) {
    const margin = Object.assign({ t: 0, r: 10, b: 45, l: 55 }, layout.margin || {});
    const out = Object.assign({}, layout);
    if (layout.title) {
      margin.t = Math.max(margin.t, TOOLBAR_PX + 26);
      out.title = Object.assign({}, layout.title, { y: 1, yref: "paper", yanchor: "bottom", pad: { b: 8 } });
    }
    if (layout.legend && layout.legend.orientation === "h") {
      margin.b = Math.max(margin.b, 88);
      out.legend = Object.assign({}, layout.legend, { y: 0, yref: "container", yanchor: "bottom" });
    }
    out.margin = margin;
    return out;
  }
  const react = (id, data, layout, config) => Plotly.react(id, data, roomy(layout), config);
  const FMT = (v) => (v === null || v === undefined || Number.isNaN(v) ? "–" : v.toFixed(3));
  const num = (v) => (Number.isNaN(v) ? null : v);
  /* greyscale-safe: each series differs in lightness and in pattern or dash */
  const INK = { output: "#1f2f5c", oracle: "#ffffff", lens: "#8a8a8a", control: "#c9c9c9" };

  function bytes(b64) {
    const s = atob(b64);
    const u = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) u[i] = s.charCodeAt(i);
    return u.buffer;
  }

  /* an n-d array from {shape, dtype, b64}: at(i, j, ...) and row(i, ...) over the last axis */
  function nd(o) {
    const buf = bytes(o.b64);
    const data = o.dtype === "i4" ? new Int32Array(buf) : new Float32Array(buf);
    const shape = o.shape;
    const strides = new Array(shape.length);
    let s = 1;
    for (let i = shape.length - 1; i >= 0; i--) { strides[i] = s; s *= shape[i]; }
    const off = (ix) => { let k = 0; for (let i = 0; i < ix.length; i++) k += ix[i] * strides[i]; return k; };
    return {
      data, shape,
      at: (...ix) => data[off(ix)],
      row: (...ix) => { const k = off(ix); return Array.from(data.subarray(k, k + shape[shape.length - 1])); },
    };
  }

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "text") e.textContent = v; else e.setAttribute(k, v);
    }
    for (const c of kids) if (c) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    return e;
  }

  function select(id, label, values, onChange, show) {
    const s = el("select", { id: id });
    values.forEach((v, i) => s.appendChild(el("option", { value: String(i), text: show ? show(v) : String(v) })));
    s.addEventListener("change", () => onChange(Number(s.value)));
    $("controls").appendChild(el("label", { for: id }, label + " ", s));
    return s;
  }

  function slider(id, label, values, onChange) {
    const r = el("input", { id: id, type: "range", min: "0", max: String(values.length - 1), step: "1" });
    const o = el("output", { id: id + "-value", for: id });
    r.addEventListener("input", () => onChange(Number(r.value)));
    $("controls").appendChild(el("label", { for: id }, label + " ", r, o));
    return { input: r, out: o, set: (i) => { r.value = String(i); o.textContent = String(values[i]); } };
  }

  function status(text) { $("note").textContent = text; }

  function ready() {
    if (!window.blReady) window.blReadyMs = performance.now();
    window.blReady = true;
    document.body.dataset.ready = "1";
  }

  /* the page's keys: moves() maps a key to a change of the view's selection */
  function onKeys(moves, set) {
    document.addEventListener("keydown", (ev) => {
      const tag = (ev.target && ev.target.tagName) || "";
      if (tag === "SELECT" || tag === "INPUT" || tag === "TEXTAREA" || ev.altKey || ev.ctrlKey || ev.metaKey) return;
      const change = moves()[ev.key];
      if (!change) return;
      ev.preventDefault();
      set(change);
    });
  }

  /* ------------------------------------------------------------------ episode slices */
  const decoded = {};
  const waiting = {};
  function decodeSlice(raw) {
    const out = {};
    for (const [k, v] of Object.entries(raw)) {
      if (k === "tokens") {
        out.tokens = {};
        for (const [tk, tv] of Object.entries(v)) out.tokens[tk] = nd(tv);
      } else out[k] = nd(v);
    }
    return out;
  }
  window.blSlice = function (e, raw) {
    const k = String(e);
    decoded[k] = decodeSlice(raw);
    (waiting[k] || []).forEach((f) => f(decoded[k]));
    delete waiting[k];
  };
  function withSlice(e, cb) {
    const k = String(e);
    if (decoded[k]) return cb(decoded[k]);
    if (D.slices.embedded[k]) {
      decoded[k] = decodeSlice(D.slices.embedded[k]);
      delete D.slices.embedded[k];
      return cb(decoded[k]);
    }
    const file = D.slices.files[k];
    if (!file) { status("episode " + e + " has no slice in this page"); return; }
    const first = !waiting[k];
    (waiting[k] = waiting[k] || []).push(cb);
    if (!first) return;
    const s = document.createElement("script");
    s.src = file;
    s.onerror = () => status("could not load " + file + ": keep the folder of slices next to the page");
    document.head.appendChild(s);
  }

  /* ------------------------------------------------------------------ the study */
  let C, means, text, S, ctl, B, biasDrawn;
  function study() {
    C = D.coords;
    means = { lens: nd(D.means.lens_divergence), output: nd(D.means.output_divergence) };
    text = new Map();
    if (D.tokens) D.tokens.ids.forEach((id, i) => text.set(id, D.tokens.text[i]));
    S = { d: 0, p: 0, e: 0, t: 0, l: C.layer.length - 1, s: 0, m: 0, scope: 0 };
    const scopes = ["this episode", "mean over episodes"];
    ctl = {};
    ctl.d = select("delivery", "delivery", C.delivery, (i) => studySet({ d: i }));
    ctl.p = select("probe", "probe", C.probe, (i) => studySet({ p: i }));
    ctl.e = select("episode", "episode", C.episode, (i) => studySet({ e: i }));
    ctl.t = slider("turn", "turn", C.turn, (i) => studySet({ t: i }));
    ctl.l = slider("layer", "layer", C.layer, (i) => studySet({ l: i }));
    ctl.s = select("source", "source", C.source, (i) => studySet({ s: i }));
    ctl.m = select("metric", "metric", C.metric, (i) => studySet({ m: i }), (m) => m.toUpperCase());
    ctl.scope = select("scope", "heatmap", scopes, (i) => studySet({ scope: i }));
    if (D.floors) {
      const at = D.floors.sources.indexOf(C.source[0]);
      S.f = at < 0 ? 0 : at;
      ctl.f = select("floor-source", "beside its floor", D.floors.sources, (i) => studySet({ f: i }), (v) => v + marked(v));
    }
    $("keys").textContent = "Keys: ← → turn · ↑ ↓ layer · n / p or PageDown / PageUp episode · " +
      "click a heatmap cell to select its layer and turn. Layer 0 = embeddings, layer l = output of block l.";
    studyLayout();
    B = { rm: nd(D.bias.rotation_tvd_mean), rs: nd(D.bias.rotation_tvd_sem),
      pm: nd(D.bias.position_excess_mean), ps: nd(D.bias.position_excess_sem) };

    studyDraw();
  }

  function studySet(change) {
    Object.assign(S, change);
    S.t = Math.max(0, Math.min(C.turn.length - 1, S.t));
    S.l = Math.max(0, Math.min(C.layer.length - 1, S.l));
    S.e = Math.max(0, Math.min(C.episode.length - 1, S.e));
    studyDraw();
  }

  function studyLayout() {
    const app = $("app");
    app.appendChild(el("h2", { text: "Episode" }));
    app.appendChild(el("div", { class: "grid" },
      el("section", { class: "panel", "aria-labelledby": "h-conv" },
        el("h3", { id: "h-conv", text: "The read-out's context, as the model saw it" }),
        el("p", { id: "token-caption", class: "help" }),
        el("div", { id: "tokens", class: "tokens", tabindex: "0", "aria-label": "context tokens" }),
        el("div", { id: "token-info", "aria-live": "polite" })),
      el("section", { class: "panel", "aria-labelledby": "h-bel" },
        el("h3", { id: "h-bel", text: "Beliefs at this turn" }),
        el("div", { id: "beliefs", class: "chart" }),
        el("table", { id: "belief-table", class: "values" }))));
    app.appendChild(el("div", { class: "grid" },
      el("section", { class: "panel", "aria-labelledby": "h-heat" },
        el("h3", { id: "h-heat", text: "Divergence to the oracle by layer and turn" }),
        el("div", { id: "heatmap", class: "chart tall" })),
      el("section", { class: "panel", "aria-labelledby": "h-traj" },
        el("h3", { id: "h-traj", text: "Divergence to the oracle per turn" }),
        el("div", { id: "trajectory", class: "chart tall" }))));
    if (D.floors) {
      app.appendChild(el("h2", { text: "Each read-out per layer beside untrained networks" }));
      app.appendChild(el("div", { class: "grid" },
        el("section", { class: "panel", "aria-labelledby": "h-floor" },
          el("h3", { id: "h-floor", text: "The read-out per layer (every question), the untrained band and the best statistic baseline" }),
          el("div", { id: "floor", class: "chart tall" })),
        el("section", { class: "panel", "aria-labelledby": "h-floor-at" },
          el("h3", { id: "h-floor-at", text: "At the selected layer" }),
          el("table", { id: "floor-table", class: "values" }),
          el("p", { id: "floor-note", class: "help" }))));
    }
    app.appendChild(el("h2", { text: "Study summary" }));
    app.appendChild(el("div", { class: "grid" },
      el("section", { class: "panel" }, el("h3", { text: "Position bias: each rotation's belief vs the debiased one" }),
        el("div", { id: "bias-rotation", class: "chart" })),
      el("section", { class: "panel" }, el("h3", { text: "Position bias: excess probability per answer slot" }),
        el("div", { id: "bias-option", class: "chart" }))));
    for (const [title, body] of Object.entries(D.tables)) {
      app.appendChild(el("h3", { text: title }));
      app.appendChild(el("pre", { class: "table", text: body }));
    }
    onKeys(() => ({
      ArrowLeft: { t: S.t - 1 }, ArrowRight: { t: S.t + 1 },
      ArrowUp: { l: S.l + 1 }, ArrowDown: { l: S.l - 1 },
      n: { e: S.e + 1 }, PageDown: { e: S.e + 1 }, p: { e: S.e - 1 }, PageUp: { e: S.e - 1 },
    }), studySet);
  }

  function studyDraw() {
    ctl.d.value = S.d; ctl.p.value = S.p; ctl.e.value = S.e; ctl.s.value = S.s;
    ctl.m.value = S.m; ctl.scope.value = S.scope;
    if (ctl.f) ctl.f.value = S.f;
    ctl.t.set(S.t); ctl.l.set(S.l);
    withSlice(C.episode[S.e], (sl) => {
      studyTokens(sl); studyBeliefs(sl); studyHeatmap(sl); studyTrajectory(sl);
      if (D.floors) studyFloor();
      ready();
      /* the summary's charts, below the episode views, depend on delivery and probe only:
         drawn after the first screen, and again only when those change */
      const key = S.d + "/" + S.p;
      if (biasDrawn !== key) { biasDrawn = key; setTimeout(studyBias, 0); }
    });
  }

  function studyWhere() {
    return `episode ${C.episode[S.e]}, ${C.delivery[S.d]}, probe ${C.probe[S.p]}, turn ${C.turn[S.t]}`;
  }

  function studyTokens(sl) {
    const T = sl.tokens;
    const box = $("tokens");
    box.textContent = "";
    const n = T.length.at(S.d, S.p, S.t);
    const start = T.start.at(S.d, S.p, S.t);
    const ap = T.answer_pos.at(S.d, S.p, S.t);
    if (n <= 0) { $("token-caption").textContent = `No read-out at ${studyWhere()}.`; return; }
    const rot = T.rotation.at(S.d, S.p, S.t);
    $("token-caption").textContent = `${studyWhere()}: rotation ${rot} (the others differ only in the order ` +
      `the answers are shown); ${n} tokens; the answer position ${ap} (outlined) is where every belief is read.` +
      (D.tokens ? "" : " This file records no token text (extracted before it did): token ids are shown.");
    const frag = document.createDocumentFragment();
    for (let k = 0; k < n; k++) {
      const id = T.ids.data[start + k];
      const known = text.has(id);
      const shown = known ? text.get(id) : `⟨${id}⟩`;
      const span = el("span", { class: "tok", "data-pos": String(k), "data-id": String(id),
        title: `position ${k} · id ${id} · answer position ${ap}` });
      span.textContent = shown === "" ? "∅" : shown;
      if (!known || /^<\|.*\|>$|^<.*>$/.test(shown)) span.classList.add("special");
      if (k === ap) { span.classList.add("answer"); span.setAttribute("aria-label", "answer position " + ap); }
      frag.appendChild(span);
    }
    box.appendChild(frag);
    const answer = box.querySelector(".answer");  /* the read position in view */
    if (answer) box.scrollTop = Math.max(0, answer.offsetTop - box.clientHeight + 3 * answer.offsetHeight);
    box.onmouseover = (ev) => {
      const s = ev.target.closest(".tok");
      if (!s) return;
      const id = Number(s.dataset.id);
      $("token-info").textContent = `position ${s.dataset.pos} · id ${id}` +
        (text.has(id) ? ` · ${JSON.stringify(text.get(id))}` : "") + ` · answer position ${ap}`;
    };
  }

  function studyBeliefs(sl) {
    const labels = D.labels[C.probe[S.p]] || [];
    const k = labels.length;
    const out = sl.belief.row(S.d, S.p, S.t).slice(0, k);
    const orc = sl.oracle.row(S.d, S.p, S.t).slice(0, k);
    const lens = sl.lens_belief.row(S.s, S.d, S.p, S.t, S.l).slice(0, k);
    const lensName = `${C.source[S.s]} at layer ${C.layer[S.l]}`;
    const bar = (name, y, color, pattern) => ({ type: "bar", name, x: labels, y: y.map(num),
      marker: { color, line: { color: "#000", width: 1 }, pattern: { shape: pattern } },
      hovertemplate: "%{x}: %{y:.3f}<extra>" + name + "</extra>" });
    react("beliefs", [
      bar("output", out, INK.output, ""), bar("oracle", orc, INK.oracle, "/"), bar(lensName, lens, INK.lens, "x"),
    ], { barmode: "group", margin: { t: 30, r: 10, b: 40, l: 50 }, title: { text: studyWhere(), font: { size: 12 } },
      xaxis: { title: { text: "outcome" } }, yaxis: { title: { text: "P(outcome)" }, range: [0, 1] },
      legend: { orientation: "h", y: -0.2 } }, PLOT);
    const m = S.m;
    const table = $("belief-table");
    table.textContent = "";
    table.appendChild(el("caption", { text: `${studyWhere()} · ${lensName} · metric ${C.metric[m].toUpperCase()}` }));
    table.appendChild(el("tr", {}, el("th", { text: "outcome" }), el("th", { text: "output" }),
      el("th", { text: "oracle" }), el("th", { text: lensName })));
    labels.forEach((lab, i) => table.appendChild(el("tr", { "data-outcome": lab }, el("th", { text: lab }),
      el("td", { "data-col": "output", text: FMT(out[i]) }), el("td", { "data-col": "oracle", text: FMT(orc[i]) }),
      el("td", { "data-col": "lens", text: FMT(lens[i]) }))));
    table.appendChild(el("tr", { class: "divergence" },
      el("th", { text: `${C.metric[m].toUpperCase()} to oracle (${D.units[C.metric[m]]})` }),
      el("td", { "data-col": "output", id: "div-output", text: FMT(sl.output_divergence.at(m, S.d, S.p, S.t)) }),
      el("td", { text: "0" }),
      el("td", { "data-col": "lens", id: "div-lens", text: FMT(sl.lens_divergence.at(m, S.s, S.d, S.p, S.t, S.l)) })));
  }

  function studyHeatmap(sl) {
    const m = S.m;
    const mean = S.scope === 1;
    const z = C.layer.map((_, l) => C.turn.map((_, t) => num(mean
      ? means.lens.at(m, S.s, S.d, S.p, t, l) : sl.lens_divergence.at(m, S.s, S.d, S.p, t, l))));
    const unit = D.units[C.metric[m]];
    /* the selected cell: a white frame inside a black one, visible on any colour and in greyscale */
    const box = (x, y, color, width) => ({ type: "rect", xref: "x", yref: "y", x0: x - 0.5, x1: x + 0.5, y0: y - 0.5, y1: y + 0.5,
      line: { color, width } });
    react("heatmap", [{
      type: "heatmap", x: C.turn, y: C.layer, z, colorscale: "Cividis", zmin: 0,
      colorbar: { title: { text: unit, side: "right" } },
      hovertemplate: "turn %{x}<br>layer %{y}<br>" + C.metric[m] + " %{z:.3f}<extra></extra>",
    }], {
      title: { text: `${C.source[S.s]}${marked(C.source[S.s])}: ${C.metric[m].toUpperCase()} to the oracle, ` +
        (mean ? `mean over episodes (${C.delivery[S.d]}, ${C.probe[S.p]})` : studyWhere().replace(/, turn.*/, "")), font: { size: 12 } },
      margin: { t: 36, r: 10, b: 45, l: 55 },
      xaxis: { title: { text: "turn" }, dtick: C.turn.length <= 30 ? 1 : undefined },
      yaxis: { title: { text: "layer (0 = embeddings)" }, dtick: C.layer.length <= 16 ? 1 : undefined },
      shapes: [box(C.turn[S.t], C.layer[S.l], "#000", 5), box(C.turn[S.t], C.layer[S.l], "#fff", 2)],
    }, PLOT);
    const gd = $("heatmap");
    if (!gd.dataset.bound) {
      gd.dataset.bound = "1";
      gd.on("plotly_click", (ev) => {
        const pt = ev.points[0];
        studySet({ t: C.turn.indexOf(pt.x), l: C.layer.indexOf(pt.y) });
      });
    }
  }

  function studyTrajectory(sl) {
    const m = S.m;
    const mean = S.scope === 1;
    const outY = C.turn.map((_, t) => num(mean ? means.output.at(m, S.d, S.p, t) : sl.output_divergence.at(m, S.d, S.p, t)));
    const lensY = C.turn.map((_, t) => num(mean ? means.lens.at(m, S.s, S.d, S.p, t, S.l) : sl.lens_divergence.at(m, S.s, S.d, S.p, t, S.l)));
    react("trajectory", [
      { type: "scatter", mode: "lines+markers", name: "output", x: C.turn, y: outY, line: { color: INK.output, width: 3 } },
      { type: "scatter", mode: "lines+markers", name: `${C.source[S.s]} at layer ${C.layer[S.l]}`, x: C.turn, y: lensY,
        line: { color: "#6e6e6e", dash: "dash", width: 2 }, marker: { symbol: "square" } },
    ], {
      title: { text: (mean ? "mean over episodes" : `episode ${C.episode[S.e]}`) + `, ${C.delivery[S.d]}, ${C.probe[S.p]}`, font: { size: 12 } },
      margin: { t: 36, r: 10, b: 45, l: 55 }, xaxis: { title: { text: "turn" }, dtick: 1 },
      yaxis: { title: { text: D.units[C.metric[m]] }, rangemode: "tozero" }, legend: { orientation: "h", y: -0.2 },
      shapes: [{ type: "line", xref: "x", yref: "paper", x0: C.turn[S.t], x1: C.turn[S.t], y0: 0, y1: 1, line: { color: "#000", dash: "dot" } }],
    }, PLOT);
    const gd = $("trajectory");
    if (!gd.dataset.bound) {
      gd.dataset.bound = "1";
      gd.on("plotly_click", (ev) => studySet({ t: C.turn.indexOf(ev.points[0].x) }));
    }
  }

  /* " (no shown power)" after a read-out whose test has not shown power on a known pair of
     this study's kind (the page's marks: belieflens power) */
  function marked(src) {
    const n = (D.marks || {})[src] || ((D.floors && D.floors.by_source[src]) || {}).note || "";
    return n.startsWith("no shown power") ? " (no shown power)" : "";
  }

  /* the floored read-out per layer: the untrained band (the controls' range), each control,
     the best statistic baseline, this network and the layers beyond both */
  function studyFloor() {
    const F = D.floors;
    const src = F.sources[S.f];
    const v = F.by_source[src];
    const x = F.layer;
    const arr = (k) => Array.from(nd(v[k]).data).map(num);
    const lo = arr("floor_min"), hi = arr("floor_max"), tr = arr("trained");
    const beyond = Array.from(nd(v.exceeds).data);
    const ctlv = nd(v.controls);
    const traces = [
      { type: "scatter", mode: "lines", x, y: lo, line: { width: 0 }, hoverinfo: "skip", showlegend: false },
      { type: "scatter", mode: "lines", x, y: hi, fill: "tonexty", fillcolor: "rgba(110,110,110,0.3)", line: { width: 0 },
        name: `untrained band (${F.controls.length} seeds)`, hoverinfo: "skip" },
    ];
    F.controls.forEach((c, i) => traces.push({ type: "scatter", mode: "lines", x, y: ctlv.row(i).map(num), name: c,
      line: { color: "#9a9a9a", width: 1 }, showlegend: i === 0, legendgroup: "controls" }));
    if (v.baseline) traces.push({ type: "scatter", mode: "lines", x: [x[0], x[x.length - 1]], y: [v.baseline_value, v.baseline_value],
      name: `best statistic baseline (${v.baseline})`, line: { color: "#000", dash: "dash", width: 1.5 } });
    traces.push({ type: "scatter", mode: "lines+markers", x, y: tr, name: "this network", line: { color: INK.output, width: 3 } });
    const bx = x.filter((_, i) => beyond[i] === 1);
    traces.push({ type: "scatter", mode: "markers", x: bx, y: bx.map((l) => tr[x.indexOf(l)]), name: "beyond both (corrected interval > 0)",
      marker: { symbol: "star", size: 11, color: "#000" } });
    const tvd = v.metric === "tvd";
    react("floor", traces, {
      title: { text: `${src}${marked(src)}: ${tvd ? "TVD to the oracle (lower is better)" : "held-out R²"}`, font: { size: 12 } },
      margin: { t: 36, r: 10, b: 45, l: 55 }, xaxis: { title: { text: "layer (0 = embeddings)" } },
      yaxis: { title: { text: tvd ? "TVD" : "R²" } }, legend: { orientation: "h", y: -0.2 },
      shapes: [{ type: "line", xref: "x", yref: "paper", x0: C.layer[S.l], x1: C.layer[S.l], y0: 0, y1: 1, line: { color: "#000", dash: "dot" } }],
    }, PLOT);
    const l = x.indexOf(C.layer[S.l]);
    const t = $("floor-table");
    t.textContent = "";
    t.appendChild(el("caption", { text: `${src} at layer ${C.layer[S.l]}` }));
    const row = (name, val) => t.appendChild(el("tr", {}, el("th", { text: name }), el("td", { text: val })));
    const at = (k) => (l < 0 ? NaN : nd(v[k]).at(l));
    row("this network", FMT(at("trained")));
    row("untrained floor (mean)", FMT(at("floor_mean")));
    row("untrained band", `${FMT(at("floor_min"))} – ${FMT(at("floor_max"))}`);
    if (v.baseline) row(`best statistic baseline (${v.baseline})`, FMT(v.baseline_value));
    row(`selectivity [${Math.round(F.level * 100)}% interval, corrected]`,
      `${FMT(at("selectivity"))} [${FMT(at("selectivity_low"))}, ${FMT(at("selectivity_high"))}]`);
    row("beyond both", l >= 0 && beyond[l] === 1 ? "yes" : "no");
    $("floor-note").textContent = v.note || "";
    const gd = $("floor");
    if (!gd.dataset.bound) { gd.dataset.bound = "1"; gd.on("plotly_click", (ev) => studySet({ l: C.layer.indexOf(ev.points[0].x) })); }
  }

  function studyBias() {
    const sub = `${C.delivery[S.d]}, ${C.probe[S.p]}; mean ± 1 SEM over instances`;
    const bars = (x, m, s, xt, yt, id) => react(id, [{
      type: "bar", x, y: m.map(num), error_y: { type: "data", array: s.map((v) => (Number.isNaN(v) ? 0 : v)) },
      marker: { color: "#6e6e6e", line: { color: "#000", width: 1 } } }], {
      title: { text: sub, font: { size: 12 } }, margin: { t: 30, r: 10, b: 45, l: 55 },
      xaxis: { title: { text: xt }, dtick: 1 }, yaxis: { title: { text: yt } } }, PLOT);
    bars(D.bias.rotation, B.rm.row(S.d, S.p), B.rs.row(S.d, S.p), "rotation", "TVD(rotation's belief, debiased)", "bias-rotation");
    bars(D.bias.option, B.pm.row(S.d, S.p), B.ps.row(S.d, S.p), "option (answer position)", "excess probability", "bias-option");
  }


  function header() {
    document.title = D.title;
    $("title").textContent = D.title;
    $("provenance").textContent = D.provenance || "";
    $("note").textContent = D.note || "";
    $("headline").textContent = D.headline || "";
  }

  /* ------------------------------------------------------------------ shared by the others */
  function panel(id, title, tall) {
    return el("section", { class: "panel" }, el("h3", { text: title }), el("div", { id: id, class: tall ? "chart tall" : "chart" }));
  }
  /* the keys line, two tall charts side by side ([id, title] each), then the tables */
  function twoPanels(keys, left, right) {
    $("keys").textContent = keys;
    $("app").appendChild(el("div", { class: "grid" }, panel(left[0], left[1], true), panel(right[0], right[1], true)));
    bodyText();
  }
  function bodyText() {
    if (!D.body) return;
    $("app").appendChild(el("h2", { text: "Tables" }));
    $("app").appendChild(el("pre", { class: "table", text: D.body }));
  }
  function line(name, x, y, err, style) {
    return Object.assign({ type: "scatter", mode: "lines+markers", name, x, y: y.map(num),
      error_y: err ? { type: "data", array: err.map((v) => (Number.isNaN(v) ? 0 : v)), thickness: 1 } : undefined }, style);
  }
  const STYLES = [
    { line: { color: "#1f2f5c", width: 3 }, marker: { symbol: "circle" } },
    { line: { color: "#7a7a7a", width: 2, dash: "dash" }, marker: { symbol: "square" } },
    { line: { color: "#000000", width: 1.5, dash: "dot" }, marker: { symbol: "diamond" } },
    { line: { color: "#4d4d4d", width: 2, dash: "dashdot" }, marker: { symbol: "triangle-up" } },
    { line: { color: "#a8a8a8", width: 3, dash: "longdash" }, marker: { symbol: "x" } },
  ];
  const style = (i) => STYLES[i % STYLES.length];

  /* ------------------------------------------------------------------ a patch file */
  let PC, P, A, per, bel, vars, PS, pctl;
  function patch() {
    PC = D.coords;
    P = D.pairs;
    A = { transfer: nd(D.summary.transfer_mean), tvd_source_oracle: nd(D.summary.tvd_source_oracle_mean) };
    per = { transfer: nd(P.transfer), tvd_source_oracle: nd(P.tvd_source_oracle) };
    bel = { base: nd(P.base), source: nd(P.source), oracle: nd(P.source_oracle), patched: nd(P.patched), k: nd(P.n_outcome) };
    vars = ["transfer", "tvd_source_oracle"];
    PS = { d: 0, p: 0, t: PC.turn.length - 1, l: 0, s: 0, v: 0, pair: 0 };
    pctl = {
      d: select("delivery", "delivery", PC.delivery, (i) => patchSet({ d: i })),
      p: select("probe", "probe", PC.probe, (i) => patchSet({ p: i })),
      t: select("turn", "turn", PC.turn, (i) => patchSet({ t: i })),
      v: select("variable", "value", vars, (i) => patchSet({ v: i }), (v) => (v === "transfer" ? "belief transfer" : "TVD to the source's oracle")),
    };
    $("keys").textContent = "Keys: ↑ ↓ layer · ← → patched positions · n / p pair. Click a cell to list its pairs.";
    $("app").appendChild(el("div", { class: "grid" },
      panel("heatmap", "Patching: layer × patched positions (mean over pairs)", true),
      el("section", { class: "panel" }, el("h3", { text: "Base and source read-outs at the selected cell" }),
        el("table", { id: "pair-table", class: "values" }), el("div", { id: "pair-beliefs", class: "chart" }))));
    bodyText();
    onKeys(() => ({ ArrowUp: { l: PS.l + 1 }, ArrowDown: { l: PS.l - 1 }, ArrowLeft: { s: PS.s - 1 },
      ArrowRight: { s: PS.s + 1 }, n: { pair: PS.pair + 1 }, p: { pair: PS.pair - 1 } }), patchSet);
    patchDraw();
  }

  function patchSet(c) {
    Object.assign(PS, c);
    PS.l = Math.max(0, Math.min(PC.layer.length - 1, PS.l));
    PS.s = Math.max(0, Math.min(PC.positions.length - 1, PS.s));
    patchDraw();
  }

  function patchPairs() {
    const out = [];
    P.delivery.forEach((d, i) => { if (d === PC.delivery[PS.d] && P.probe[i] === PC.probe[PS.p] && P.turn[i] === PC.turn[PS.t]) out.push(i); });
    return out;
  }

  function patchDraw() {
    pctl.d.value = PS.d; pctl.p.value = PS.p; pctl.t.value = PS.t; pctl.v.value = PS.v;
    const v = vars[PS.v];
    const z = PC.layer.map((_, l) => PC.positions.map((_, s) => num(A[v].at(PS.d, PS.p, PS.t, l, s))));
    react("heatmap", [{ type: "heatmap", x: PC.positions, y: PC.layer, z, colorscale: "Cividis",
      colorbar: { title: { text: v === "transfer" ? "belief transfer (1 = the source's belief)" : "TVD" } },
      hovertemplate: "positions %{x}<br>layer %{y}<br>%{z:.3f}<extra></extra>" }], {
      title: { text: `${PC.probe[PS.p]} (${PC.delivery[PS.d]}), turn ${PC.turn[PS.t]}`, font: { size: 12 } },
      margin: { t: 36, r: 10, b: 45, l: 55 }, xaxis: { title: { text: "positions (patched)" } },
      yaxis: { title: { text: "layer (0 = embeddings)" } },
      shapes: [{ type: "rect", xref: "x", yref: "y", x0: PS.s - 0.5, x1: PS.s + 0.5, y0: PC.layer[PS.l] - 0.5, y1: PC.layer[PS.l] + 0.5,
        line: { color: "#000", width: 4 } }] }, PLOT);
    const gd = $("heatmap");
    if (!gd.dataset.bound) {
      gd.dataset.bound = "1";
      gd.on("plotly_click", (ev) => patchSet({ l: PC.layer.indexOf(ev.points[0].y), s: PC.positions.indexOf(ev.points[0].x), pair: 0 }));
    }
    patchLinked();
    ready();
  }

  function patchLinked() {
    const rows = patchPairs();
    PS.pair = Math.max(0, Math.min(rows.length - 1, PS.pair));
    const t = $("pair-table");
    t.textContent = "";
    t.appendChild(el("caption", { text: `layer ${PC.layer[PS.l]}, positions ${PC.positions[PS.s]}: ${rows.length} pairs (click a row)` }));
    t.appendChild(el("tr", {}, el("th", { text: "base episode" }), el("th", { text: "source episode" }),
      el("th", { text: "belief transfer" }), el("th", { text: "TVD to source's oracle" })));
    rows.forEach((i, j) => {
      const tr = el("tr", { "data-pair": String(i), tabindex: "0", class: j === PS.pair ? "selected" : "" },
        el("th", { text: String(P.episode[i]) }), el("td", { text: String(P.source_episode[i]) }),
        el("td", { text: FMT(per.transfer.at(i, PS.l, PS.s)) }), el("td", { text: FMT(per.tvd_source_oracle.at(i, PS.l, PS.s)) }));
      tr.addEventListener("click", () => patchSet({ pair: j }));
      if (j === PS.pair) tr.style.fontWeight = "700";
      t.appendChild(tr);
    });
    if (!rows.length) { Plotly.purge("pair-beliefs"); return; }
    const i = rows[PS.pair];
    const k = bel.k.at(i);
    const labels = (D.labels && D.labels[P.probe[i]]) || Array.from({ length: k }, (_, j) => "outcome " + j);
    const bar = (name, y, color, pattern) => ({ type: "bar", name, x: labels, y: y.slice(0, k).map(num),
      marker: { color, line: { color: "#000", width: 1 }, pattern: { shape: pattern } } });
    react("pair-beliefs", [bar("base", bel.base.row(i), INK.output, ""), bar("source", bel.source.row(i), INK.lens, "x"),
      bar("patched", bel.patched.row(i, PS.l, PS.s), "#d0d0d0", "."), bar("source's oracle", bel.oracle.row(i), INK.oracle, "/")],
    { barmode: "group", title: { text: `base episode ${P.episode[i]} ← source episode ${P.source_episode[i]}`, font: { size: 12 } },
      margin: { t: 36, r: 10, b: 40, l: 50 }, yaxis: { title: { text: "P(outcome)" }, range: [0, 1] }, xaxis: { title: { text: "outcome" } },
      legend: { orientation: "h", y: -0.2 } }, PLOT);
  }


  /* ------------------------------------------------------------------ a steering file */
  function steer() {
    const C = D.coords;
    const A = {}; for (const [k, v] of Object.entries(D.summary)) A[k] = nd(v);
    const K = {}; for (const [k, v] of Object.entries(D.curves)) K[k] = nd(v);
    const S = { d: 0, p: 0, l: 0 };
    const ctl = {
      d: select("delivery", "delivery", C.delivery, (i) => set({ d: i })),
      p: select("probe", "probe", C.probe, (i) => set({ p: i })),
      l: slider("layer", "layer", C.layer, (i) => set({ l: i })),
    };
    twoPanels("Keys: ← → layer. Click a layer in the slopes to see its curves.",
      ["slopes", "Slope of the point estimate per unit α, per layer"],
      ["curves", "Steering curves at the selected layer (mean ± 1 SEM over instances)"]);
    onKeys(() => ({ ArrowLeft: { l: S.l - 1 }, ArrowRight: { l: S.l + 1 } }), set);
    function set(c) { Object.assign(S, c); S.l = Math.max(0, Math.min(C.layer.length - 1, S.l)); draw(); }
    function draw() {
      ctl.d.value = S.d; ctl.p.value = S.p; ctl.l.set(S.l);
      const r = (n) => A[n].row(S.d, S.p);
      react("slopes", [line("decoder direction", C.layer, r("slope_mean"), r("slope_sem"), style(0)),
        line("random control", C.layer, r("control_slope_mean"), r("control_slope_sem"), style(1)),
        line("selectivity", C.layer, r("selectivity_mean"), r("selectivity_sem"), style(2))], {
        title: { text: `${C.probe[S.p]} (${C.delivery[S.d]})`, font: { size: 12 } }, margin: { t: 36, r: 10, b: 45, l: 55 },
        xaxis: { title: { text: "layer (0 = embeddings)" } }, yaxis: { title: { text: "Δ point estimate per unit α" } },
        legend: { orientation: "h", y: -0.2 },
        shapes: [{ type: "line", xref: "x", yref: "paper", x0: C.layer[S.l], x1: C.layer[S.l], y0: 0, y1: 1, line: { color: "#000", dash: "dot" } }] }, PLOT);
      const c = (n) => K[n].row(S.d, S.p, S.l);
      react("curves", [line("decoder direction", C.alpha, c("estimate_mean"), c("estimate_sem"), style(0)),
        line("random control", C.alpha, c("control_estimate_mean"), c("control_estimate_sem"), style(1))], {
        title: { text: `layer ${C.layer[S.l]}`, font: { size: 12 } }, margin: { t: 36, r: 10, b: 45, l: 55 },
        xaxis: { title: { text: "α (SDs of the residuals along the direction)" } }, yaxis: { title: { text: "point estimate of the belief" } },
        legend: { orientation: "h", y: -0.2 } }, PLOT);
      const gd = $("slopes");
      if (!gd.dataset.bound) { gd.dataset.bound = "1"; gd.on("plotly_click", (ev) => set({ l: C.layer.indexOf(ev.points[0].x) })); }
      ready();
    }
    draw();
  }

  /* ------------------------------------------------------------------ an erasure file */
  function erase() {
    const C = D.coords;
    const A = {}; for (const [k, v] of Object.entries(D.summary)) A[k] = nd(v);
    const S = { d: 0, p: 0 };
    const ctl = { d: select("delivery", "delivery", C.delivery, (i) => set({ d: i })),
      p: select("probe", "probe", C.probe, (i) => set({ p: i })) };
    $("app").appendChild(el("div", { class: "grid" }, panel("erase", "Movement toward the prior after erasure, per layer", true)));
    bodyText();
    function set(c) { Object.assign(S, c); draw(); }
    function draw() {
      ctl.d.value = S.d; ctl.p.value = S.p;
      const r = (n) => A[n].row(S.d, S.p);
      react("erase", [line("LEACE", C.layer, r("toward_prior_mean"), r("toward_prior_sem"), style(0)),
        line("random subspace", C.layer, r("control_toward_prior_mean"), r("control_toward_prior_sem"), style(1))], {
        title: { text: `${C.probe[S.p]} (${C.delivery[S.d]})`, font: { size: 12 } }, margin: { t: 36, r: 10, b: 45, l: 55 },
        xaxis: { title: { text: "layer (0 = embeddings)" } }, yaxis: { title: { text: "1 − TVD(erased, prior) / TVD(clean, prior)" } },
        legend: { orientation: "h", y: -0.2 } }, PLOT);
      ready();
    }
    draw();
  }

  /* ------------------------------------------------------------------ an interchange file */
  function interchange() {
    const C = D.coords;
    const A = {}; for (const [k, v] of Object.entries(D.summary)) A[k] = nd(v);
    const S = { s: Math.max(0, C.split.indexOf("test")), p: Math.max(0, C.pairing.indexOf("any")) };
    const ctl = { s: select("split", "held-out pairs", C.split, (i) => set({ s: i })),
      p: select("pairing", "pairing", C.pairing, (i) => set({ p: i })) };
    $("app").appendChild(el("div", { class: "grid" }, panel("interchange", "Follow per layer: the learned subspace against its floors", true)));
    bodyText();
    function set(c) { Object.assign(S, c); draw(); }
    function series(name, m, var_, i) {
      const y = A[var_].row(S.s, S.p, m), lo = A[var_ + "_low"].row(S.s, S.p, m), hi = A[var_ + "_high"].row(S.s, S.p, m);
      const tr = line(name, C.layer, y, null, style(i));
      tr.error_y = { type: "data", symmetric: false, thickness: 1,
        array: y.map((v, k) => (Number.isNaN(hi[k] - v) ? 0 : hi[k] - v)), arrayminus: y.map((v, k) => (Number.isNaN(v - lo[k]) ? 0 : v - lo[k])) };
      return tr;
    }
    function draw() {
      ctl.s.value = S.s; ctl.p.value = S.p;
      const traces = [series("learned subspace", 0, "follow", 0), series("random subspace", 0, "control_follow", 1)];
      C.model.forEach((m, i) => { if (i > 0) traces.push(series(`learned subspace, untrained ${m}`, i, "follow", i + 1)); });
      const best = D.best_layer === null ? [] : [{ type: "line", xref: "x", yref: "paper", x0: D.best_layer, x1: D.best_layer, y0: 0, y1: 1, line: { color: "#000", dash: "dot" } }];
      Plotly.react("interchange", traces, {
        title: { text: `${C.split[S.s]} pairs, ${C.pairing[S.p]} pairing (dotted: the best layer on validation pairs)`, font: { size: 12 } },
        margin: { t: 36, r: 10, b: 45, l: 55 }, xaxis: { title: { text: "layer (0 = embeddings)" } },
        yaxis: { title: { text: "follow (1 = moves as the oracle says)" } }, shapes: best,
        legend: { orientation: "h", y: -0.2 } }, PLOT);
      ready();
    }
    draw();
  }

  /* ------------------------------------------------------------------ a comparison */
  function compare() {
    const C = D.coords;
    const T = { m: nd(D.tvd_mean), s: nd(D.tvd_sem), om: nd(D.output_tvd_mean), os: nd(D.output_tvd_sem), layer: nd(D.layer) };
    const S = { d: 0, p: 0, t: 0, src: Math.max(0, C.source.indexOf("logit-lens")) };
    const ctl = {
      d: select("delivery", "delivery", C.delivery, (i) => set({ d: i })),
      p: select("probe", "probe", C.probe, (i) => set({ p: i })),
      src: select("source", "source", C.source, (i) => set({ src: i })),
      t: slider("turn", "turn", C.turn, (i) => set({ t: i })),
    };
    twoPanels("Keys: ← → turn. Click a turn in the output chart to select it. " + (D.depth_note || ""),
      ["depth", "TVD to the oracle against relative depth, every model"],
      ["turns", "Output TVD to the oracle per turn, every model"]);
    const FL = D.floors;
    if (FL) {
      S.r = 0;
      ctl.r = select("floor-readout", "beside its floor", FL.readouts, (i) => set({ r: i }));
      $("app").insertBefore(el("div", { class: "grid" }, panel("floors", "Each model beside untrained networks of its shape (every question)", true),
        el("section", { class: "panel" }, el("h3", { text: "Power of each test on a known pair of the model's kind" }),
          el("ul", { id: "floor-notes", class: "help" }))), $("app").querySelector("h2"));
    }
    function drawFloors() {
      const A = { t: nd(FL.trained), lo: nd(FL.min), hi: nd(FL.max), ex: nd(FL.exceeds) };
      const r = FL.readouts[S.r];
      const traces = [];
      const notes = $("floor-notes");
      notes.textContent = "";
      C.model.forEach((m, i) => {
        if (!FL.has[i]) return;
        const st = style(i);
        traces.push({ type: "scatter", mode: "lines", x: C.depth, y: A.lo.row(i, S.r).map(num), line: { width: 0 }, hoverinfo: "skip", showlegend: false });
        traces.push({ type: "scatter", mode: "lines", x: C.depth, y: A.hi.row(i, S.r).map(num), fill: "tonexty", fillcolor: "rgba(110,110,110,0.25)",
          line: { width: 0 }, name: `${m}: untrained band`, hoverinfo: "skip" });
        const y = A.t.row(i, S.r).map(num);
        const note = FL.notes[m][r];
        const mark = note.startsWith("no shown power") ? " (no shown power)" : "";
        traces.push(Object.assign({ type: "scatter", mode: "lines", x: C.depth, y, name: m + mark }, { line: st.line }));
        const ex = A.ex.row(i, S.r);
        const bx = C.depth.filter((_, k) => ex[k] === 1);
        traces.push({ type: "scatter", mode: "markers", x: bx, y: bx.map((d) => y[C.depth.indexOf(d)]), name: `${m}: beyond its floor`,
          marker: { symbol: "star", size: 10, color: "#000" } });
        notes.appendChild(el("li", { text: `${m}, ${r}: ${note}` }));
      });
      react("floors", traces, { title: { text: `${r}: TVD to the oracle per relative depth`, font: { size: 12 } },
        margin: { t: 36, r: 10, b: 45, l: 55 }, xaxis: { title: { text: "relative depth (layer / blocks; 0 = embeddings)" }, range: [0, 1] },
        yaxis: { title: { text: "TVD to the oracle" }, rangemode: "tozero" }, legend: { orientation: "h", y: -0.2 } }, PLOT);
    }
    onKeys(() => ({ ArrowLeft: { t: S.t - 1 }, ArrowRight: { t: S.t + 1 } }), set);
    function set(c) { Object.assign(S, c); S.t = Math.max(0, Math.min(C.turn.length - 1, S.t)); draw(); }
    function draw() {
      ctl.d.value = S.d; ctl.p.value = S.p; ctl.src.value = S.src; ctl.t.set(S.t);
      if (FL) { ctl.r.value = S.r; drawFloors(); }
      const depth = C.model.map((m, i) => line(`${m} (${D.n_layers[i]} blocks)`, C.depth,
        C.depth.map((_, k) => T.m.at(i, S.d, S.p, S.t, k, S.src)), C.depth.map((_, k) => T.s.at(i, S.d, S.p, S.t, k, S.src)),
        Object.assign({ customdata: C.depth.map((_, k) => T.layer.at(i, k)),
          hovertemplate: "depth %{x:.2f} (layer %{customdata})<br>TVD %{y:.3f}<extra>" + m + "</extra>" }, style(i))));
      react("depth", depth, { title: { text: `${C.source[S.src]}, ${C.probe[S.p]} (${C.delivery[S.d]}), turn ${C.turn[S.t]}`, font: { size: 12 } },
        margin: { t: 36, r: 10, b: 45, l: 55 }, xaxis: { title: { text: "relative depth (layer / blocks; 0 = embeddings)" }, range: [0, 1] },
        yaxis: { title: { text: "TVD to the oracle (0 = the oracle)" }, rangemode: "tozero" }, legend: { orientation: "h", y: -0.2 } }, PLOT);
      const turns = C.model.map((m, i) => line(m, C.turn, C.turn.map((_, t) => T.om.at(i, S.d, S.p, t)),
        C.turn.map((_, t) => T.os.at(i, S.d, S.p, t)), style(i)));
      react("turns", turns, { title: { text: `${C.probe[S.p]} (${C.delivery[S.d]}), mean ± 1 SEM over episodes`, font: { size: 12 } },
        margin: { t: 36, r: 10, b: 45, l: 55 }, xaxis: { title: { text: "turn" }, dtick: 1 },
        yaxis: { title: { text: "output TVD to the oracle" }, rangemode: "tozero" }, legend: { orientation: "h", y: -0.2 },
        shapes: [{ type: "line", xref: "x", yref: "paper", x0: C.turn[S.t], x1: C.turn[S.t], y0: 0, y1: 1, line: { color: "#000", dash: "dot" } }] }, PLOT);
      const gd = $("turns");
      if (!gd.dataset.bound) { gd.dataset.bound = "1"; gd.on("plotly_click", (ev) => set({ t: C.turn.indexOf(ev.points[0].x) })); }
      ready();
    }
    draw();
  }

  window.blData = D;
  header();
  const apps = { study, patch, steer, erase, interchange, compare };
  (apps[D.kind] || (() => status("unknown page kind " + D.kind)))();
})();
