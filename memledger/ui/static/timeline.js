/* memledger timeline: the system-time slider, positions, and the audit panel. No network, no library.
   Every stored text is written with textContent (never innerHTML), so a memory holding markup shows as text.
   Instants are fixed-width ISO 8601 UTC strings with microseconds ("2024-03-01T09:00:00.000000Z"): comparing them
   as strings is comparing the instants, with the ledger's own rule (as-of inclusive, valid time half-open). */
(function () {
  "use strict";
  /* the sign-in form: a #fragment (as_of, axis) never reaches the server, so it travels in "next" */
  var login = document.getElementById("login-form");
  if (login) {
    login.addEventListener("submit", function () {
      var next = login.elements.next;
      if (window.location.hash && next.value.indexOf("#") < 0) { next.value += window.location.hash; }
    });
  }
  var node = document.getElementById("ml-data");
  if (!node) { return; }
  var data = JSON.parse(node.textContent);
  var byKey = {};
  data.keys.forEach(function (k) { byKey[k.key] = k; });
  /* imported history opens on observed time (the model decides: most of it said long before it was recorded) */
  var defaultAxis = data.default_axis === "observed" ? "observed" : "system";
  var axis = defaultAxis;
  var ticks = axis === "system" ? data.ticks : data.observed_ticks;

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    if (cls) { e.className = cls; }
    return e;
  }
  /* said with "I think", "maybe": believed, but uncertain (as `context` says it) */
  function hedged(v) { return Boolean(v && v.hygiene && v.hygiene.hedged); }
  function shown(v) {
    if (v.withheld) { return "withheld (" + v.withheld + ")"; }
    if (v.status === "forgotten" && v.value === null) { return "forgotten"; }
    return typeof v.value === "string" ? v.value : JSON.stringify(v.value);
  }

  /* place bars from their data attributes (no inline style in the markup: the pages' CSP allows none) */
  Array.prototype.forEach.call(document.querySelectorAll("[data-x]"), function (e) {
    e.style.left = e.dataset.x + "%";
    if (e.dataset.w !== undefined) { e.style.width = e.dataset.w + "%"; }
    if (e.dataset.lane !== undefined) { e.style.top = (Number(e.dataset.lane) * 1.9) + "em"; }
  });
  Array.prototype.forEach.call(document.querySelectorAll(".track[data-lanes]"), function (e) {
    e.style.height = (Number(e.dataset.lanes) * 1.9 + 0.1) + "em";
  });
  var rowsHeight = document.getElementById("rows");

  /* bars that carry a label wider than their span (a session of minutes on an axis of months, a disclosure at one
     instant): each is widened to its label from where it starts (or, near the right edge, up to where it ends) and
     those that would then overlap are stacked, measured in pixels so no label hides another */
  function fitLabels() {
    Array.prototype.forEach.call(document.querySelectorAll(".track[data-lanes]"), function (track) {
      var bars = Array.prototype.slice.call(track.querySelectorAll(".bar[data-fit]"));
      if (!bars.length) { return; }
      var full = track.clientWidth, ends = [];
      bars.sort(function (p, q) { return Number(p.dataset.x) - Number(q.dataset.x); }).forEach(function (b) {
        var t = b.querySelector(".t"), cs = getComputedStyle(b);
        var need = Math.ceil(t.getBoundingClientRect().width) + (b.offsetWidth - b.clientWidth) +
          parseFloat(cs.paddingLeft) + parseFloat(cs.paddingRight) + 4;
        var a = Number(b.dataset.x) / 100 * full, w = Math.max(Number(b.dataset.w) / 100 * full, need);
        var left = a + w > full ? Math.max(0, a + Number(b.dataset.w) / 100 * full - w) : a;
        b.classList.toggle("end-anchored", left < a);
        var lane = 0;
        while (lane < ends.length && left < ends[lane] + 4) { lane++; }
        ends[lane] = left + w;
        b.style.left = left + "px";
        b.style.width = w + "px";
        b.style.top = (lane * 1.9) + "em";
      });
      var msgs = track.querySelector(".msgs");
      if (msgs) { msgs.style.top = (ends.length * 1.9) + "em"; }
      track.style.height = ((ends.length + (msgs ? 1 : 0)) * 1.9 + 0.1) + "em";
    });
  }
  fitLabels();
  window.addEventListener("resize", fitLabels);

  /* a bar too short for its words shows them in a tooltip on hover and on keyboard focus (its aria-label, read
     by a screen reader, already holds them); Escape hides it */
  var tip = document.getElementById("bar-tip");
  function clipped(b) {
    var t = b.querySelector(".t");
    return t !== null && t.getBoundingClientRect().right > b.getBoundingClientRect().right - 2;
  }
  function showTip(b) {
    if (!tip || !clipped(b)) { hideTip(); return; }
    tip.textContent = b.getAttribute("aria-label");
    tip.hidden = false;
    var r = b.getBoundingClientRect(), w = tip.offsetWidth;
    tip.style.left = Math.max(4, Math.min(window.innerWidth - w - 4, r.left)) + window.scrollX + "px";
    tip.style.top = r.bottom + window.scrollY + 4 + "px";
    b.setAttribute("aria-describedby", "bar-tip");
  }
  function hideTip() {
    if (!tip) { return; }
    tip.hidden = true;
    Array.prototype.forEach.call(document.querySelectorAll('[aria-describedby="bar-tip"]'), function (b) {
      b.removeAttribute("aria-describedby");
    });
  }
  document.addEventListener("mouseover", function (ev) {
    var b = ev.target.closest ? ev.target.closest("button.bar") : null;
    if (b) { showTip(b); } else if (!(document.activeElement && document.activeElement.matches("button.bar"))) { hideTip(); }
  });
  document.addEventListener("focusin", function (ev) {
    if (ev.target.matches && ev.target.matches("button.bar")) { showTip(ev.target); } else { hideTip(); }
  });
  document.addEventListener("keydown", function (ev) { if (ev.key === "Escape") { hideTip(); } });
  window.addEventListener("scroll", function () {
    if (tip && !tip.hidden && document.activeElement && document.activeElement.matches("button.bar")) {
      showTip(document.activeElement);
    }
  }, {passive: true});

  /* the filter box: a row stays when its name, key or any value shown in it contains every word typed (any case);
     a group with no row left is hidden with them */
  var filter = document.getElementById("row-filter"), filterCount = document.getElementById("filter-count");
  function haystack(k) {
    var parts = [k.key, k.name || ""];
    k.versions.forEach(function (v) { parts.push(shown(v)); if (v.text) { parts.push(v.text); } });
    return parts.join("\n").toLowerCase();
  }
  function applyFilter() {
    var words = filter.value.toLowerCase().split(/\s+/).filter(Boolean), seen = 0, total = 0;
    Array.prototype.forEach.call(document.querySelectorAll(".group"), function (g) {
      var any = false;
      Array.prototype.forEach.call(g.querySelectorAll(".row[data-key]"), function (r) {
        var k = byKey[r.dataset.key], text = k._text || (k._text = haystack(k));
        var keep = words.every(function (w) { return text.indexOf(w) >= 0; });
        r.hidden = !keep;
        total++;
        if (keep) { seen++; any = true; }
      });
      g.hidden = !any;
    });
    filterCount.textContent = seen + " of " + total + " rows";
  }
  if (filter) { filter.addEventListener("input", applyFilter); }

  /* the version of key k believed at instant `at` about valid instant `at`: memledger believed --as-of, on the
     system axis (the row held at `at`) or the observed axis (the row held just before the key's first event said
     after `at`: position_from < F <= position_to) */
  /* the rows of key k that the instant `at` sees, whatever their valid range: on the system axis those held at
     `at`, on the observed axis those held just before the key's first event said after `at` */
  function rowsAt(k, at) {
    var first = null;
    if (axis === "observed") {
      k.events.forEach(function (e) {
        if (e.observed_at !== null && e.observed_at > at && (first === null || e.position < first)) { first = e.position; }
      });
    }
    return k.timeline.filter(function (t) {
      if (axis === "system") { return t.recorded_from <= at && (t.recorded_to === null || at < t.recorded_to); }
      if (first === null) { return t.position_to === null; }
      return t.position_from < first && (t.position_to === null || first <= t.position_to);
    });
  }
  /* the version of key k believed at `at` about valid instant `at`: memledger believed --as-of [--axis observed] */
  function heldAt(k, at) {
    var rows = rowsAt(k, at);
    for (var i = 0; i < rows.length; i++) {
      var t = rows[i];
      if (t.valid_from <= at && (t.valid_to === null || at < t.valid_to)) { return t; }
    }
    return null;
  }
  function versionOf(k, n) {
    for (var i = 0; i < k.versions.length; i++) { if (k.versions[i].version === n) { return k.versions[i]; } }
    for (var j = 0; j < k.events.length; j++) { if (k.events[j].version === n) { return k.events[j]; } }
    return null;
  }
  function valuePct(at) {
    /* where valid instant `at` falls on the valid-time axis (percent of the track) */
    if (!data.axis) { return null; }
    return (Date.parse(at) - Date.parse(data.axis.from)) / (data.axis.span_seconds * 1000) * 100;
  }
  function clamp(x) { return Math.max(0, Math.min(100, x)); }

  /* each version's bar over its valid range as the instant saw it (a later change of mind or correction had not
     narrowed it yet); a version the instant does not see keeps its range as known now. Overlapping bars of a row
     are stacked in lanes. */
  function placeBars(rowEl, k, at) {
    var live = {};
    rowsAt(k, at).forEach(function (t) { live[t.version] = t; });
    var spans = Array.prototype.map.call(rowEl.querySelectorAll(".bar[data-version]"), function (b) {
      var t = live[Number(b.dataset.version)], a, e;
      if (t) {
        a = clamp(valuePct(t.valid_from));
        e = t.valid_to === null ? 100 : clamp(valuePct(t.valid_to));
        if (a >= 99) { a = 92; e = 100; }  /* far in the future: at the right edge, as the server draws it */
      } else {
        a = Number(b.dataset.x);
        e = a + Number(b.dataset.w);
      }
      b.classList.toggle("then", Boolean(t));
      return {b: b, a: a, w: Math.max(e - a, 0.6)};
    });
    var ends = [];
    spans.slice().sort(function (p, q) { return p.a - q.a; }).forEach(function (sp) {
      var lane = 0;
      while (lane < ends.length && sp.a < ends[lane]) { lane++; }
      ends[lane] = Math.max(sp.a + sp.w, sp.a + 0.8);
      sp.b.style.left = sp.a + "%";
      sp.b.style.width = sp.w + "%";
      sp.b.style.top = (lane * 1.9) + "em";
    });
    rowEl.querySelector(".track").style.height = (Math.max(ends.length, 1) * 1.9 + 0.1) + "em";
  }

  var out = document.getElementById("asof-out"), slider = document.getElementById("asof");
  var text = document.getElementById("asof-text"), error = document.getElementById("asof-error");
  var cursor = document.getElementById("cursor");

  function show(at) {
    current = at;
    out.textContent = at;
    slider.setAttribute("aria-valuetext", at);
    Array.prototype.forEach.call(document.querySelectorAll("[data-believed]"), function (cell) {
      var k = byKey[cell.dataset.believed], t = heldAt(k, at);
      if (t === null) {
        cell.textContent = "nothing believed";
        cell.className = "believed none";
        cell.dataset.version = "";
      } else {
        var v = versionOf(k, t.version);
        cell.textContent = shown(v) + " (v" + t.version + (t.status === "contested" ? ", contested" : "") +
          (hedged(v) ? ", uncertain (hedged)" : "") + ")";
        cell.className = "believed";
        cell.dataset.version = String(t.version);
      }
      var row = cell.closest(".row");
      placeBars(row, k, at);
      Array.prototype.forEach.call(row.querySelectorAll(".bar[data-version]"), function (b) {
        b.classList.toggle("held", t !== null && Number(b.dataset.version) === t.version);
        b.classList.toggle("unrecorded", axis === "system" && b.dataset.recorded > at);
        b.classList.toggle("unsaid", axis === "observed" && b.dataset.observed > at);
      });
    });
    var pct = valuePct(at);
    if (cursor && rowsHeight) {
      cursor.hidden = pct === null || pct < 0 || pct > 100;
      if (!cursor.hidden) {
        cursor.style.left = pct + "%";
        /* down to the end of the rows (not into the audit panel below them) */
        cursor.style.height = Math.max(0, rowsHeight.getBoundingClientRect().bottom - cursor.parentElement.getBoundingClientRect().top) + "px";
      }
    }
  }

  function normalise(s) {
    /* an ISO 8601 instant with an offset -> the fixed-width UTC form; null if it is not one */
    s = s.trim();
    if (/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/.test(s)) { return s; }
    if (!/^\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)$/i.test(s)) { return null; }
    var micros = (s.match(/\.(\d+)/) || [null, ""])[1];
    var ms = Date.parse(s.replace(" ", "T"));
    if (isNaN(ms)) { return null; }
    var iso = new Date(ms).toISOString();  /* milliseconds; keep the digits given beyond them */
    return iso.replace(/Z$/, (micros + "000000").slice(3, 6) + "Z");
  }
  function snap(at) {
    var i = 0;
    while (i + 1 < ticks.length && ticks[i + 1] <= at) { i++; }
    return i;
  }

  var current = ticks[ticks.length - 1];
  var axisWord = document.getElementById("axis-word");
  var AXIS_WORD = {system: "system time (when the ledger recorded it)", observed: "observed time (when it was said)"};
  function setAxis(name) {
    axis = name;
    ticks = axis === "system" ? data.ticks : data.observed_ticks;
    slider.max = String(ticks.length - 1);
    slider.value = String(snap(current));
    if (axisWord) { axisWord.textContent = AXIS_WORD[axis]; }
    /* the note on which axis is shown first speaks of the default: gone once the reader picks the other one */
    var note = document.getElementById("axis-default-note");
    if (note) { note.hidden = axis !== defaultAxis; }
    slider.setAttribute("aria-label", (axis === "system" ? "System time" : "Observed time") + ": as we believed on");
  }
  /* the view in the address (#as_of=...&axis=...), so it can be kept, sent or reloaded; replaceState adds no
     history entry per slider step and fires no hashchange */
  function writeHash() {
    try { window.history.replaceState(null, "", "#as_of=" + current + "&axis=" + axis); } catch (e) { /* a page
      whose address cannot change (an opaque origin): the view still works */ }
  }
  Array.prototype.forEach.call(document.querySelectorAll('input[name="axis"]'), function (radio) {
    radio.addEventListener("change", function () {
      if (!radio.checked) { return; }
      setAxis(radio.value);
      show(current);
      writeHash();
    });
  });

  slider.addEventListener("input", function () {
    var at = ticks[Number(slider.value)];
    text.value = at;
    error.textContent = "";
    show(at);
    writeHash();
  });
  document.getElementById("asof-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var at = normalise(text.value);
    if (at === null) {
      error.textContent = "Not an instant: write it as ISO 8601 with an offset, e.g. 2024-03-01T09:00:00Z.";
      return;
    }
    error.textContent = "";
    slider.value = String(snap(at));
    show(at);
    writeHash();
  });

  /* -- the audit panel ------------------------------------------------------------------------------------- */
  var panel = document.getElementById("audit"), body = document.getElementById("audit-body");
  var empty = document.getElementById("audit-empty");
  function dl(pairs) {
    var d = el("dl", null, "facts");
    pairs.forEach(function (p) {
      if (p[1] === null || p[1] === undefined || p[1] === "") { return; }
      d.appendChild(el("dt", p[0]));
      d.appendChild(el("dd", p[1]));
    });
    return d;
  }
  function table(cols, rows, mark) {
    var t = el("table"), head = el("tr");
    cols.forEach(function (c) { var th = el("th", c[0]); th.scope = "col"; head.appendChild(th); });
    var thead = el("thead"); thead.appendChild(head); t.appendChild(thead);
    var tb = el("tbody");
    rows.forEach(function (r) {
      var tr = el("tr");
      if (mark && mark(r)) { tr.className = "this"; }
      cols.forEach(function (c) {
        var v = c[1](r);
        tr.appendChild(el("td", v === null || v === undefined ? "" : v));
      });
      tb.appendChild(tr);
    });
    t.appendChild(tb);
    return t;
  }
  function open(title) {
    empty.hidden = true;
    body.textContent = "";
    body.appendChild(el("h3", title));
    Array.prototype.forEach.call(document.querySelectorAll(".bar.selected"), function (b) { b.classList.remove("selected"); });
  }
  function auditVersion(key, n) {
    var k = byKey[key], v = versionOf(k, n);
    open(key + " v" + n + ": " + shown(v));
    var replaced = v.replaces === null ? null : versionOf(k, v.replaces);
    var by = v.replaced_by === null ? null : versionOf(k, v.replaced_by);
    body.appendChild(dl([
      ["drawn as", v.word], ["value", shown(v)], ["text", v.text],
      ["status (as known now)", v.status + (hedged(v) ? ", uncertain (hedged)" : "")],
      ["effect", v.effect], ["valid from", v.valid_from], ["valid to", v.valid_to === null ? "open" : v.valid_to],
      ["recorded at", v.recorded_at], ["observed at", v.observed_at], ["source", v.source],
      ["source_ref", v.source_ref], ["session", v.session_id], ["actor", v.actor], ["trace id", v.trace_id],
      ["reason", v.reason], ["confidence", v.confidence], ["sensitivity", v.sensitivity],
      ["derived from", v.derived_from && v.derived_from.length ? v.derived_from.join(", ") : null],
      ["replaced", replaced === null ? null : "v" + replaced.version + ": " + shown(replaced)],
      ["replaced by", by === null ? null : "v" + by.version + ": " + shown(by)],
      ["event", v.event_id + " at log position " + v.position]
    ]));
    var related = k.events.filter(function (e) { return e.version === n || e.replaces === n || (v.replaces !== null && e.version === v.replaces); });
    body.appendChild(el("h4", "Events"));
    body.appendChild(table([
      ["position", function (e) { return e.position; }], ["v", function (e) { return e.version; }],
      ["kind", function (e) { return e.kind; }], ["effect", function (e) { return e.effect; }],
      ["value", function (e) { return shown(e); }], ["recorded", function (e) { return e.recorded_at; }],
      ["observed", function (e) { return e.observed_at; }], ["source", function (e) { return e.source; }],
      ["source_ref", function (e) { return e.source_ref; }], ["session", function (e) { return e.session_id; }],
      ["actor", function (e) { return e.actor; }], ["trace id", function (e) { return e.trace_id; }],
      ["reason", function (e) { return e.reason; }], ["replaces", function (e) { return e.replaces; }]
    ], related, function (e) { return e.version === n; }));
    body.appendChild(el("h4", "Beliefs over system time (bitemporal rows)"));
    body.appendChild(table([
      ["recorded from", function (t) { return t.recorded_from; }],
      ["recorded to", function (t) { return t.recorded_to === null ? "now" : t.recorded_to; }],
      ["valid from", function (t) { return t.valid_from; }],
      ["valid to", function (t) { return t.valid_to === null ? "open" : t.valid_to; }],
      ["status", function (t) { return t.status; }]
    ], k.timeline.filter(function (t) { return t.version === n; })));
  }
  function auditSession(i) {
    var s = data.sessions[i];
    open("Session " + s.session_id);
    body.appendChild(dl([["task", s.task], ["status", s.status], ["started", s.started_at], ["ended", s.ended_at],
                         ["last message", s.last_at], ["messages", s.messages.length]]));
    var ul = el("ul", null, "messages");
    s.messages.forEach(function (m) {
      ul.appendChild(el("li", (m.observed_at || "") + " " + (m.speaker || m.role || "") + ": " + (m.text || "")));
    });
    body.appendChild(ul);
  }
  function auditPerson(i) {
    var p = data.people[i];
    open("Relation " + p.key + " v" + p.version);
    body.appendChild(dl([["relation", p.relation_type], ["of", p.subject], ["entity", p.entity || p.withheld],
                         ["sentence", p.text], ["status", p.status], ["valid from", p.valid_from],
                         ["valid to", p.valid_to === null ? "open" : p.valid_to], ["source", p.source],
                         ["recorded at", p.recorded_at], ["log position", p.position]]));
  }
  function auditDisclosure(i) {
    var d = data.disclosures[i];
    open("Disclosure of " + d.key + " v" + d.version);
    body.appendChild(dl([["key", d.key], ["version", d.version], ["label", d.sensitivity],
                         ["let into a context at", d.recorded_at], ["purpose", d.purpose], ["session", d.session_id],
                         ["trace id", d.trace_id], ["log position", d.position]]));
  }
  document.addEventListener("click", function (ev) {
    var b = ev.target.closest ? ev.target.closest("button.bar") : null;
    if (!b) { return; }
    if (b.dataset.version !== undefined) { auditVersion(b.dataset.key, Number(b.dataset.version)); }
    else if (b.dataset.session !== undefined) { auditSession(Number(b.dataset.session)); }
    else if (b.dataset.disclosure !== undefined) { auditDisclosure(Number(b.dataset.disclosure)); }
    else if (b.dataset.person !== undefined) { auditPerson(Number(b.dataset.person)); }
    else { return; }
    b.classList.add("selected");
    panel.scrollIntoView({block: "nearest"});
  });

  /* -- keyboard focus never hidden under the sticky slider panel (WCAG 2.4.11) ---------------------------- */
  var panelEl = document.querySelector(".slider");
  function fitScrollPadding() {
    if (panelEl) { document.documentElement.style.scrollPaddingTop = (panelEl.offsetHeight + 8) + "px"; }
  }
  window.addEventListener("resize", fitScrollPadding);
  fitScrollPadding();
  document.addEventListener("focusin", function (ev) {
    /* scroll-padding covers scrolling into view; this covers a browser that does not apply it on focus */
    if (!panelEl || ev.target === panelEl || panelEl.contains(ev.target)) { return; }
    var below = panelEl.getBoundingClientRect().bottom + 8, top = ev.target.getBoundingClientRect().top;
    if (top < below) { window.scrollBy(0, top - below); }
  });

  /* the view named by the address: #as_of=INSTANT&axis=observed, at load and whenever only the hash changes */
  function fromHash() {
    var hash = window.location.hash;
    var ax = /(?:^#|&)axis=(system|observed)(?:&|$)/.exec(hash);
    var name = ax ? ax[1] : defaultAxis;
    if (name !== axis) {
      document.querySelector('input[name="axis"][value="' + name + '"]').checked = true;
      setAxis(name);
    }
    var at = current, m = /(?:^#|&)as_of=([^&]+)/.exec(hash);
    if (m) {
      var given = null;
      try { given = normalise(decodeURIComponent(m[1])); } catch (e) { given = null; }
      if (given !== null) { at = given; }
    }
    slider.value = String(snap(at));
    text.value = at;
    error.textContent = "";
    show(at);
  }
  window.addEventListener("hashchange", fromHash);
  fromHash();
}());
