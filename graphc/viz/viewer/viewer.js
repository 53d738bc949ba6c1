// graphc view: draws one view of a graph as nested groups, laying out only what is open.
//
// Items are numbered once per view: node i is item i, group g is item N + g. A group's
// children are laid out in layers (an item one layer below every earlier item it
// reads), ordered by the mean position of what they read, and an open group is a box
// holding its own layout. Every name comes from the embedded JSON and reaches the
// document through textContent or setAttribute: it is data, never markup.
"use strict";
(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const DATA = JSON.parse(document.getElementById("graph-data").textContent);
  const el = (id) => document.getElementById(id);
  const NODE_H = 40, GROUP_H = 46, CHAR_W = 6.9, PAD = 14, HEAD = 28, GAP_X = 22, GAP_Y = 40;
  const MAX_RESULTS = 50;
  const ROLE_NAMES = {
    input: "input", constant: "constant", op: "op", output: "output", backward: "backward op",
    backward_output: "gradient", seed: "seed", saved: "saved value", result: "result",
    body_input: "body input", body_output: "body output", added: "added by the pass",
    removed: "removed by the pass",
  };
  const KIND_NAMES = {
    scope: "scope", backward: "gradients", control: "control flow", body: "body",
    fused: "fused group", repeat: "repeated structure", step: "step", block: "block",
  };

  let V = null; // the view shown: its data and what is derived from it
  let moved = false; // the last press dragged the canvas (its click selects nothing)
  const camera = { x: 0, y: 0, k: 1 };

  // ---- one view's derived tables -----------------------------------------------------

  function loadView(index) {
    const data = DATA.views[index];
    const N = data.nodes.length, G = data.groups.length;
    const parent = new Int32Array(N + G), depth = new Int32Array(N + G);
    const headOf = new Int32Array(N).fill(-1);
    data.groups.forEach((g, gi) => {
      parent[N + gi] = g.p < 0 ? -1 : N + g.p;
      if (g.h !== undefined) headOf[g.h] = N + gi;
    });
    data.nodes.forEach((n, i) => { parent[i] = N + n.p; });
    for (let gi = 1; gi < G; gi++) depth[N + gi] = depth[parent[N + gi]] + 1; // root first
    for (let i = 0; i < N; i++) depth[i] = depth[parent[i]] + 1;
    const children = data.groups.map((g) => g.c.map((c) => (c < 0 ? N - 1 - c : c)));
    const order = new Int32Array(N + G); // preorder position: the graph's order
    let position = 0;
    const stack = [N];
    while (stack.length) {
      const item = stack.pop();
      order[item] = position++;
      if (item >= N) {
        const kids = children[item - N];
        for (let k = kids.length - 1; k >= 0; k--) stack.push(kids[k]);
      }
    }
    const users = data.nodes.map(() => []);
    data.nodes.forEach((n, i) => n.i.forEach((x) => users[x].push(i)));
    V = {
      index, data, N, G, parent, depth, headOf, children, order, users,
      open: new Set(data.open.map((g) => N + g)),
      selected: -1, matches: new Set(), boxes: new Map(),
    };
    V.lifted = liftEdges();
  }

  const itemOf = (node) => (V.headOf[node] >= 0 ? V.headOf[node] : node);
  const isGroup = (item) => item >= V.N;
  const groupOf = (item) => V.data.groups[item - V.N];

  // Each edge, lifted to the children of the lowest group holding both of its ends:
  // the edges each group's own layout must respect.
  function liftEdges() {
    const lifted = new Map(), seen = new Set();
    const { parent, depth } = V;
    V.data.nodes.forEach((n, v) => {
      for (const u of n.i) {
        let a = itemOf(u), b = itemOf(v);
        while (depth[a] > depth[b]) a = parent[a];
        while (depth[b] > depth[a]) b = parent[b];
        if (a === b) continue; // one end holds the other
        while (parent[a] !== parent[b]) { a = parent[a]; b = parent[b]; }
        const key = a * 4194304 + b;
        if (seen.has(key)) continue;
        seen.add(key);
        const lca = parent[a];
        if (!lifted.has(lca)) lifted.set(lca, []);
        lifted.get(lca).push([a, b]);
      }
    });
    return lifted;
  }

  // ---- labels and sizes --------------------------------------------------------------

  // A node's two lines: its name when the program gave one (i2h, encoder.0.weight), else
  // its op; then what is left of op, name and type.
  function nodeText(i) {
    const n = V.data.nodes[i];
    if (n.k === "placeholder" || n.k === "output") {
      return [n.n, (n.s ? n.s + " · " : "") + n.t];
    }
    const named = n.n !== n.o && !new RegExp("^" + escapeRegExp(n.o) + "(_\\d+)?$").test(n.n);
    return named ? [n.n, `${n.o} · ${n.t}`] : [n.o, n.t];
  }

  function groupText(item) {
    const g = groupOf(item);
    const what = KIND_NAMES[g.k] || g.k;
    return [g.n, `${what} · ${g.z.toLocaleString("en")} node${g.z === 1 ? "" : "s"}`];
  }

  function escapeRegExp(text) { return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }

  function textWidth(text) { return Math.min(text.length, 44) * CHAR_W; }

  function boxSize(item) {
    const [title, detail] = isGroup(item) ? groupText(item) : nodeText(item);
    const w = Math.max(72, Math.min(320, Math.max(textWidth(title) + 8, textWidth(detail)) + 22));
    return { w, h: isGroup(item) ? GROUP_H : NODE_H };
  }

  // ---- layout ------------------------------------------------------------------------

  // Lays out an open group's children; returns its content size and, per child, its box
  // relative to the content's corner (open children carry their own layout).
  function layoutGroup(item) {
    const kids = V.children[item - V.N];
    const boxes = new Map();
    for (const c of kids) {
      if (isGroup(c) && V.open.has(c)) {
        const inner = layoutGroup(c);
        const [title] = groupText(c);
        const w = Math.max(inner.w + 2 * PAD, Math.min(textWidth(title), 280) + 100);
        boxes.set(c, { w, h: inner.h + HEAD + PAD, inner, open: true });
      } else {
        boxes.set(c, boxSize(c));
      }
    }
    // the lifted edges without those closing a cycle (a depth-first walk's back edges:
    // groups can read each other both ways), in the graph's order
    const preds = new Map(kids.map((c) => [c, []]));
    const succs = new Map(kids.map((c) => [c, []]));
    const out = new Map(kids.map((c) => [c, []]));
    for (const [a, b] of V.lifted.get(item) || []) out.get(a).push(b);
    const byOrder = (a, b) => V.order[a] - V.order[b];
    const state = new Map(), finished = [];
    const walk = (c) => {
      state.set(c, 1);
      for (const d of out.get(c).sort(byOrder)) {
        if (state.get(d) === 1) continue; // a back edge
        preds.get(d).push(c);
        succs.get(c).push(d);
        if (!state.has(d)) walk(d);
      }
      state.set(c, 2);
      finished.push(c);
    };
    kids.slice().sort(byOrder).forEach((c) => { if (!state.has(c)) walk(c); });
    const sorted = finished.reverse(); // a topological order of what is left
    // layers: one below everything it reads; then what reads nothing but is no input
    // (a constant, a weight read from ONNX) moves down to just above its first reader
    const layer = new Map();
    for (const c of sorted) {
      let r = 0;
      for (const p of preds.get(c)) r = Math.max(r, layer.get(p) + 1);
      layer.set(c, r);
    }
    for (const c of sorted.slice().reverse()) {
      const input = !isGroup(c) && V.data.nodes[c].k === "placeholder"; // inputs stay on top
      if (input || preds.get(c).length || !succs.get(c).length) continue;
      layer.set(c, Math.max(layer.get(c), Math.min(...succs.get(c).map((d) => layer.get(d))) - 1));
    }
    const rows = [];
    for (const c of sorted.slice().sort(byOrder)) (rows[layer.get(c)] = rows[layer.get(c)] || []).push(c);
    for (let r = rows.length - 1; r >= 0; r--) if (!rows[r]) rows.splice(r, 1);
    // order within layers: a few sweeps by the mean position of neighbours
    const place = new Map();
    const number = (row) => row.forEach((c, k) => place.set(c, (k + 0.5) / row.length));
    rows.forEach(number);
    const sweep = (row, near) => {
      const key = new Map(row.map((c) => {
        const ps = near.get(c).filter((p) => place.has(p));
        return [c, ps.length ? ps.reduce((s, p) => s + place.get(p), 0) / ps.length : place.get(c)];
      }));
      row.sort((a, b) => key.get(a) - key.get(b));
      number(row);
    };
    for (let pass = 0; pass < 3; pass++) {
      for (let r = 1; r < rows.length; r++) sweep(rows[r], preds);
      for (let r = rows.length - 2; r >= 0; r--) sweep(rows[r], succs);
    }
    // coordinates: each item near the mean centre of what it reads, rows kept apart
    let y = 0, width = 0;
    const centre = new Map();
    for (const row of rows) {
      const rowH = Math.max(...row.map((c) => boxes.get(c).h));
      let x = 0;
      const wanted = row.map((c) => {
        const ps = preds.get(c).filter((p) => centre.has(p));
        return ps.length ? ps.reduce((s, p) => s + centre.get(p), 0) / ps.length : null;
      });
      row.forEach((c, k) => {
        const box = boxes.get(c);
        const left = wanted[k] === null ? x : Math.max(x, wanted[k] - box.w / 2);
        box.x = left;
        box.y = y; // top-aligned: a tall open group beside a node leaves it near its inputs
        centre.set(c, left + box.w / 2);
        x = left + box.w + GAP_X;
      });
      width = Math.max(width, x - GAP_X);
      y += rowH + GAP_Y;
    }
    let minX = Infinity;
    boxes.forEach((b) => { minX = Math.min(minX, b.x); });
    width = 0;
    boxes.forEach((b) => { b.x -= minX; width = Math.max(width, b.x + b.w); });
    return { w: Math.max(width, 40), h: Math.max(y - GAP_Y, 20), boxes };
  }

  // Absolute boxes of everything drawn, outer groups first.
  function flatten(layout, ox, oy, out) {
    layout.boxes.forEach((b, item) => {
      const abs = { x: ox + b.x, y: oy + b.y, w: b.w, h: b.h, open: !!b.open };
      out.push([item, abs]);
      if (b.open) flatten(b.inner, abs.x + PAD, abs.y + HEAD, out);
    });
    return out;
  }

  // The item that stands for node `i` now: its outermost closed group, or itself.
  function visibleItem(i) {
    let rep = itemOf(i);
    for (let a = V.parent[rep]; a >= 0; a = V.parent[a]) {
      if (!V.open.has(a) && a !== V.N) rep = a;
    }
    return rep;
  }

  // ---- drawing -----------------------------------------------------------------------

  function svg(tag, attrs, parentNode) {
    const node = document.createElementNS(SVG, tag);
    for (const key in attrs) node.setAttribute(key, attrs[key]);
    if (parentNode) parentNode.appendChild(node);
    return node;
  }

  function clip(text, width) {
    const room = Math.max(4, Math.floor((width - 16) / CHAR_W));
    return text.length > room ? text.slice(0, room - 1) + "…" : text;
  }

  function render() {
    const started = performance.now();
    V.open.add(V.N);
    const layout = layoutGroup(V.N);
    const drawn = flatten(layout, 0, 0, []);
    V.boxes = new Map(drawn);
    V.extent = { w: layout.w, h: layout.h };
    const boxesLayer = el("boxes"), edgeLayer = el("edges"), itemLayer = el("items");
    boxesLayer.replaceChildren();
    edgeLayer.replaceChildren();
    itemLayer.replaceChildren();
    for (const [item, b] of drawn) {
      if (b.open) drawOpenGroup(item, b, boxesLayer);
      else drawItem(item, b, itemLayer);
    }
    const edgeCount = drawEdges(edgeLayer);
    const ms = performance.now() - started;
    const shown = drawn.length;
    document.body.dataset.visible = String(shown);
    el("status").textContent =
      `${V.data.name}: ${V.N.toLocaleString("en")} nodes in ${(V.G - 1).toLocaleString("en")} groups · ` +
      `${shown} boxes and ${edgeCount} edges drawn · layout and drawing ${ms.toFixed(0)} ms`;
    applyCamera();
    drawBreadcrumb();
  }

  function drawItem(item, b, layer) {
    const group = isGroup(item);
    const classes = ["item", group ? "group" : "node"];
    classes.push(group ? "kind-" + groupOf(item).k : "role-" + V.data.nodes[item].r);
    if (item === V.selected) classes.push("selected");
    if (V.matches.has(item)) classes.push("match");
    const g = svg("g", { class: classes.join(" "), transform: `translate(${b.x},${b.y})`, "data-item": item }, layer);
    const [title, detail] = group ? groupText(item) : nodeText(item);
    g.setAttribute("data-name", group ? title : V.data.nodes[item].n);
    if (group) svg("rect", { class: "shadow", x: 4, y: 4, width: b.w, height: b.h, rx: 6 }, g);
    svg("rect", { class: "body", width: b.w, height: b.h, rx: group ? 6 : 9 }, g);
    const t1 = svg("text", { class: "title", x: b.w / 2, y: 17, "text-anchor": "middle" }, g);
    t1.textContent = (group ? "⊞ " : "") + clip(title, b.w - (group ? 14 : 0));
    const t2 = svg("text", { class: "detail", x: b.w / 2, y: 32, "text-anchor": "middle" }, g);
    t2.textContent = clip(detail, b.w);
    svg("title", {}, g).textContent = `${title}\n${detail}`;
    g.addEventListener("click", (event) => {
      event.stopPropagation();
      if (group) toggle(item, true);
      else select(item, false);
    });
  }

  function drawOpenGroup(item, b, layer) {
    const g = svg("g", {
      class: `item box kind-${groupOf(item).k}` + (item === V.selected ? " selected" : ""),
      transform: `translate(${b.x},${b.y})`, "data-item": item,
    }, layer);
    const [title, detail] = groupText(item);
    g.setAttribute("data-name", title);
    svg("rect", { class: "frame body", width: b.w, height: b.h, rx: 8 }, g);
    const t = svg("text", { class: "title", x: 10, y: 18 }, g);
    t.textContent = "⊟ " + clip(title, b.w - 96);
    const d = svg("text", { class: "detail", x: b.w - 8, y: 18, "text-anchor": "end" }, g);
    d.textContent = clip(detail.split(" · ")[1], 110);
    svg("title", {}, g).textContent = `${title}\n${detail}\nclick the title to close`;
    const header = svg("rect", { x: 0, y: 0, width: b.w, height: HEAD, fill: "transparent" }, g);
    header.addEventListener("click", (event) => { event.stopPropagation(); toggle(item, true); });
  }

  function drawEdges(layer) {
    const seen = new Map();
    const nodes = V.data.nodes;
    const rep = new Int32Array(V.N);
    for (let i = 0; i < V.N; i++) rep[i] = visibleItem(i);
    nodes.forEach((n, v) => {
      for (const u of n.i) {
        const a = rep[u], b = rep[v];
        if (a === b || !V.boxes.has(a) || !V.boxes.has(b)) continue;
        const key = a * 4194304 + b;
        if (!seen.has(key)) seen.set(key, { a, b, u, v, count: 0 });
        seen.get(key).count++;
      }
    });
    const hot = V.selected;
    seen.forEach(({ a, b, u, v, count }) => {
      const s = V.boxes.get(a), t = V.boxes.get(b);
      const x1 = s.x + s.w / 2, y1 = s.y + s.h, x2 = t.x + t.w / 2, y2 = t.y;
      let d;
      const back = y2 < y1 + 4;
      if (!back) {
        const dy = (y2 - y1) / 2;
        d = `M${x1},${y1} C${x1},${y1 + dy} ${x2},${y2 - dy} ${x2},${y2}`;
      } else {
        const side = Math.max(s.x + s.w, t.x + t.w) + 30;
        d = `M${s.x + s.w},${s.y + s.h / 2} C${side},${s.y + s.h / 2} ${side},${t.y + t.h / 2} ${t.x + t.w},${t.y + t.h / 2}`;
      }
      const isHot = a === hot || b === hot;
      const path = svg("path", { class: "edge" + (back ? " back" : "") + (isHot ? " hot" : ""), d, "marker-end": "url(#arrow)" }, layer);
      if (count > 1) path.setAttribute("stroke-width", String(Math.min(1.3 + Math.log2(count), 5)));
      svg("title", {}, path).textContent =
        `${nodes[u].n} → ${nodes[v].n}: ${nodes[u].t}` + (count > 1 ? ` (${count} edges)` : "");
    });
    return seen.size;
  }

  function drawLegend() {
    const legend = el("legend");
    legend.replaceChildren();
    const roles = new Set(V.data.nodes.map((n) => n.r));
    const swatch = (cls, label) => {
      const s = document.createElement("span");
      const i = document.createElement("i");
      i.className = cls;
      s.append(i, label);
      legend.appendChild(s);
    };
    const colours = {
      input: "#d6eaf8", constant: "#eeeeee", op: "#fef9e7", output: "#d5f5e3", backward: "#fadbd8",
      backward_output: "#f5b7b1", seed: "#fdebd0", saved: "#fdebd0", result: "#ffffff",
      body_input: "#ebf5fb", body_output: "#ebf5fb", added: "#d5f5e3", removed: "#f2f3f4",
    };
    for (const role of Object.keys(ROLE_NAMES)) {
      if (!roles.has(role)) continue;
      swatch("", ROLE_NAMES[role]);
      legend.lastChild.firstChild.style.background = colours[role];
    }
    swatch("", "⊞ group: click to open");
    legend.lastChild.firstChild.style.background = "#f4f6f7";
  }

  // ---- camera ------------------------------------------------------------------------

  function applyCamera() {
    el("viewport").setAttribute("transform", `translate(${camera.x},${camera.y}) scale(${camera.k})`);
  }

  function fit() {
    const rect = el("canvas").getBoundingClientRect();
    // a tall layout is fitted to the width, its top shown: labels stay readable
    const kw = (rect.width - 40) / V.extent.w, kh = (rect.height - 40) / V.extent.h;
    camera.k = Math.max(Math.min(kw, Math.max(kh, 0.5), 1.2), 0.05);
    camera.x = (rect.width - V.extent.w * camera.k) / 2;
    camera.y = Math.max(20, (rect.height - V.extent.h * camera.k) / 2);
    applyCamera();
  }

  function centreOn(item) {
    const b = V.boxes.get(item);
    if (!b) return;
    const rect = el("canvas").getBoundingClientRect();
    camera.k = Math.max(camera.k, 0.8);
    if (b.w * camera.k > rect.width - 40) camera.k = Math.max(0.1, (rect.width - 40) / b.w);
    camera.x = rect.width / 2 - (b.x + b.w / 2) * camera.k;
    camera.y = rect.height / 2 - (b.y + Math.min(b.h, 200) / 2) * camera.k;
    applyCamera();
  }

  function installPanZoom() {
    const canvas = el("canvas");
    let drag = null;
    canvas.addEventListener("mousedown", (e) => {
      drag = { x: e.clientX, y: e.clientY, cx: camera.x, cy: camera.y };
      moved = false;
      canvas.classList.add("panning");
    });
    window.addEventListener("mousemove", (e) => {
      if (!drag) return;
      if (Math.abs(e.clientX - drag.x) + Math.abs(e.clientY - drag.y) > 3) moved = true;
      camera.x = drag.cx + e.clientX - drag.x;
      camera.y = drag.cy + e.clientY - drag.y;
      applyCamera();
    });
    window.addEventListener("mouseup", () => { drag = null; canvas.classList.remove("panning"); });
    canvas.addEventListener("wheel", (e) => {
      e.preventDefault();
      const rect = canvas.getBoundingClientRect();
      const px = e.clientX - rect.left, py = e.clientY - rect.top;
      const factor = Math.exp(-e.deltaY * 0.0015);
      const k = Math.min(4, Math.max(0.02, camera.k * factor));
      camera.x = px - ((px - camera.x) * k) / camera.k;
      camera.y = py - ((py - camera.y) * k) / camera.k;
      camera.k = k;
      applyCamera();
    }, { passive: false });
  }

  // ---- opening, selecting, searching ------------------------------------------------

  // Open or close a group, keeping it where it was on the screen.
  function toggle(item, andSelect) {
    const before = V.boxes.get(item);
    if (V.open.has(item)) V.open.delete(item);
    else V.open.add(item);
    if (andSelect) V.selected = item;
    render();
    const after = V.boxes.get(item);
    if (before && after) {
      camera.x += (before.x - after.x) * camera.k;
      camera.y += (before.y - after.y) * camera.k;
      applyCamera();
    }
    showDetails(item);
  }

  function ancestors(item) {
    const path = [];
    for (let a = V.parent[item]; a >= 0; a = V.parent[a]) path.unshift(a);
    return path;
  }

  // Open every group holding `item`, select it and bring it to the middle.
  function reveal(item) {
    for (const a of ancestors(item)) V.open.add(a);
    select(isGroup(item) ? item : itemOf(item) === item ? item : itemOf(item), true, item);
  }

  function select(item, centre, detailsOf) {
    V.selected = item;
    render();
    if (centre) centreOn(item);
    showDetails(detailsOf === undefined ? item : detailsOf);
  }

  function search(query) {
    const list = el("search-results");
    list.replaceChildren();
    const q = query.trim().toLowerCase();
    V.matches = new Set();
    if (!q) { list.hidden = true; render(); return []; }
    // the exact name first, then names starting with the query, then the rest
    const found = [], starts = [], exact = [];
    V.data.nodes.forEach((n, i) => {
      const name = n.n.toLowerCase();
      if (name === q) exact.push(i);
      else if (name.startsWith(q)) starts.push(i);
      else if (name.includes(q) || n.o.toLowerCase() === q) found.push(i);
    });
    found.unshift(...exact, ...starts);
    const counter = document.createElement("li");
    counter.className = "count";
    counter.textContent = found.length
      ? `${found.length.toLocaleString("en")} match${found.length === 1 ? "" : "es"}` +
        (found.length > MAX_RESULTS ? ` (first ${MAX_RESULTS})` : "") + ": Enter opens the first"
      : "no node has this name or op";
    list.appendChild(counter);
    for (const i of found.slice(0, MAX_RESULTS)) {
      const n = V.data.nodes[i];
      const li = document.createElement("li");
      li.dataset.node = String(i);
      const name = document.createElement("span");
      name.className = "name";
      name.textContent = n.n;
      const op = document.createElement("span");
      op.className = "op";
      op.textContent = `${n.o} · ${n.t}`;
      const where = document.createElement("span");
      where.className = "where";
      where.textContent = V.data.groups[n.p].n;
      li.append(name, op, where);
      li.addEventListener("mousedown", (e) => { e.preventDefault(); pick(i); });
      list.appendChild(li);
    }
    list.hidden = false;
    for (const i of found.slice(0, 2000)) V.matches.add(visibleItem(i));
    render();
    return found;
  }

  function pick(node) {
    el("search-results").hidden = true;
    reveal(node);
  }

  // ---- the details panel and the breadcrumb ------------------------------------------

  function row(table, label, value) {
    if (value === undefined || value === null || value === "") return;
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    th.textContent = label;
    const td = document.createElement("td");
    if (value instanceof Node) td.appendChild(value);
    else td.textContent = String(value);
    tr.append(th, td);
    table.appendChild(tr);
  }

  function link(text, onClick) {
    const b = document.createElement("button");
    b.className = "link";
    b.textContent = text;
    b.addEventListener("click", onClick);
    return b;
  }

  function nodeList(panel, title, ids) {
    if (!ids.length) return;
    const h = document.createElement("h3");
    h.textContent = `${title} (${ids.length})`;
    const ul = document.createElement("ul");
    for (const i of ids.slice(0, 40)) {
      const li = document.createElement("li");
      const n = V.data.nodes[i];
      li.appendChild(link(`${n.n} · ${n.t}`, () => reveal(i)));
      ul.appendChild(li);
    }
    panel.append(h, ul);
  }

  function nodeDetails(panel, i) {
    const n = V.data.nodes[i];
    const h = document.createElement("h2");
    h.textContent = n.n;
    const sub = document.createElement("div");
    sub.className = "sub";
    sub.textContent = `${n.o} · ${ROLE_NAMES[n.r] || n.r}`;
    const table = document.createElement("table");
    table.id = "node-facts";
    row(table, "op", n.k === "op" ? n.o : undefined);
    row(table, "kind", n.k);
    row(table, "type", n.t);
    row(table, "stands for", n.s);
    row(table, "scope", n.c);
    row(table, "source", n.l === undefined ? undefined : V.data.locs[n.l]);
    if (n.g !== undefined) {
      const target = V.data.nodes.findIndex((m) => m.n === n.g && !m.s);
      row(table, "gradient of", target >= 0 ? link(n.g, () => reveal(target)) : n.g);
    }
    panel.append(h, sub, table);
    if (n.a && n.a.length) {
      const head = document.createElement("h3");
      head.textContent = "attributes";
      const attrs = document.createElement("table");
      for (const [key, value] of n.a) row(attrs, key, value);
      panel.append(head, attrs);
    }
    nodeList(panel, "reads", n.i);
    nodeList(panel, "read by", V.users[i]);
  }

  function groupDetails(panel, item) {
    const g = groupOf(item);
    const h = document.createElement("h2");
    h.textContent = g.n;
    const sub = document.createElement("div");
    sub.className = "sub";
    sub.textContent = `${KIND_NAMES[g.k] || g.k} · ${g.z.toLocaleString("en")} nodes · ${g.c.length} children`;
    const button = document.createElement("button");
    button.className = "action";
    button.textContent = V.open.has(item) ? "close this group" : "open this group";
    button.addEventListener("click", () => toggle(item, true));
    panel.append(h, sub, button);
    // what it holds, by op
    const counts = new Map();
    const stack = [item];
    while (stack.length) {
      const it = stack.pop();
      if (isGroup(it)) {
        stack.push(...V.children[it - V.N]);
        const head = groupOf(it).h;
        if (head !== undefined) stack.push(head);
      } else counts.set(V.data.nodes[it].o, (counts.get(V.data.nodes[it].o) || 0) + 1);
    }
    const table = document.createElement("table");
    [...counts].sort((a, b) => b[1] - a[1]).slice(0, 12).forEach(([op, k]) => row(table, op, `× ${k}`));
    const ops = document.createElement("h3");
    ops.textContent = "ops inside";
    panel.append(ops, table);
    if (g.h !== undefined) {
      const head = document.createElement("h3");
      head.textContent = "the node";
      panel.appendChild(head);
      nodeDetails(panel, g.h);
    }
  }

  function showDetails(item) {
    const panel = el("details");
    panel.replaceChildren();
    if (item < 0) return;
    if (isGroup(item)) groupDetails(panel, item);
    else nodeDetails(panel, item);
  }

  function drawBreadcrumb() {
    const nav = el("breadcrumb");
    nav.replaceChildren();
    const path = V.selected >= 0 ? [...ancestors(V.selected), V.selected] : [V.N];
    path.forEach((item, k) => {
      if (k) {
        const sep = document.createElement("span");
        sep.className = "sep";
        sep.textContent = "›";
        nav.appendChild(sep);
      }
      const label = isGroup(item) ? groupOf(item).n : V.data.nodes[item].n;
      const b = document.createElement("button");
      b.textContent = label.length > 48 ? label.slice(0, 47) + "…" : label;
      b.title = label;
      b.addEventListener("click", () => select(item, true));
      nav.appendChild(b);
    });
  }

  // ---- start -------------------------------------------------------------------------

  function show(index) {
    loadView(index);
    drawLegend();
    render();
    fit();
    showDetails(-1);
    const hint = document.createElement("p");
    hint.className = "hint";
    document.body.dataset.ready = performance.now().toFixed(0);
    hint.textContent = "Click a node for its type, source line and attributes; click a group (⊞) to open it, its title to close it; drag to pan, scroll to zoom, / to search, f to fit, Esc to clear.";
    el("details").appendChild(hint);
  }

  function start() {
    const select = el("view-select");
    DATA.views.forEach((view, k) => {
      const option = document.createElement("option");
      option.value = String(k);
      option.textContent = `${view.name} (${view.nodes.length.toLocaleString("en")} nodes)`;
      select.appendChild(option);
    });
    select.addEventListener("change", () => show(Number(select.value)));
    const input = el("search");
    let timer = 0;
    input.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => search(input.value), 120);
    });
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") {
        clearTimeout(timer);
        const found = search(input.value);
        if (found.length) pick(found[0]);
      } else if (e.key === "Escape") {
        input.value = "";
        search("");
      }
    });
    input.addEventListener("blur", () => setTimeout(() => { el("search-results").hidden = true; }, 150));
    input.addEventListener("focus", () => { if (input.value) search(input.value); });
    el("fit").addEventListener("click", fit);
    el("collapse-all").addEventListener("click", () => { V.open = new Set([V.N]); V.selected = -1; render(); fit(); });
    el("canvas").addEventListener("click", () => {
      if (!moved) { V.selected = -1; render(); }
    });
    window.addEventListener("keydown", (e) => {
      if (e.target === input) return;
      if (e.key === "/") { e.preventDefault(); input.focus(); }
      if (e.key === "f") fit();
      if (e.key === "Escape") { V.selected = -1; V.matches = new Set(); render(); showDetails(-1); }
    });
    installPanZoom();
    show(0);
    window.graphcView = { show, reveal, search, visible: () => Number(document.body.dataset.visible) };
  }

  start();
})();
