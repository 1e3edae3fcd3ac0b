"""HTML of the timeline and health pages, server-rendered from the view models of :mod:`memledger.ui.model`.

Every stored text goes through :func:`esc` (``html.escape`` with quotes) into the markup, and into the embedded
JSON through :func:`json_for_script` (``<``, ``>``, ``&`` and the line separators written as ``\\u`` escapes, so
no stored text can close the ``<script type="application/json">`` element); the script reads it with
``JSON.parse`` and writes every text with ``textContent``. A memory holding ``<script>`` shows as that text.

Two shapes of the same page: ``inline=False`` (served by ``memledger serve http``: the script and style are
``/ui/static/...`` URLs on the same server) and ``inline=True`` (``memledger timeline --html``: one file with the
script and style inside, and a Content-Security-Policy that lets it fetch nothing at all).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import urllib.parse
from datetime import datetime, timedelta
from importlib import resources
from typing import Any

from ledger.timeutil import parse_instant

from .model import CATEGORIES, CATEGORY_WORD, FREE_TEXT_GROUP

#: the glyph each category's bar starts with (beside its word: never colour alone)
GLYPH = {"forgotten": "\u2205", "quarantined": "\u2298", "scheduled": "\u2192", "corrected": "\u270e", "retracted": "\u2715",
         "superseded": "\u21b7", "contested": "\u26a0", "contesting": "\u2047", "hedged": "~", "current": "\u25cf"}
STATIC = ("timeline.css", "timeline.js")
#: how the page names each time axis (the script writes the same words when the choice changes)
AXIS_WORD = {"system": "system time (when the ledger recorded it)", "observed": "observed time (when it was said)"}
#: the room left on each side of the data on the valid-time axis, as a share of the data's span
AXIS_MARGIN = 0.03
#: ``now`` closes the axis when the data ends within this share of its span before it (a live user's rows run
#: to today); data that ended long ago (a history imported years later) keeps the axis to itself
NOW_REACH = 0.25

def esc(value: Any) -> str:
    """``value`` as HTML text or attribute content (``&<>"'`` escaped); None -> ``""``."""
    return "" if value is None else html.escape(str(value), quote=True)


def json_for_script(data: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: no ``<``, ``>``, ``&``, U+2028 or U+2029 as such."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for ch, rep in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"), ("\u2028", "\\u2028"),
                    ("\u2029", "\\u2029")):
        text = text.replace(ch, rep)
    return text


def user_path(user_id: str) -> str | None:
    """The path of ``user_id``'s page, the id percent-encoded as one segment (``/`` as ``%2F``, ``?`` as
    ``%3F``, ``#`` as ``%23``), or None for ``.`` and ``..``, which a browser resolves as a step in the path
    whatever their spelling (such a user is opened with ``memledger timeline``)."""
    if user_id in (".", ".."):
        return None
    return "/ui/users/" + urllib.parse.quote(user_id, safe="")


def static_text(name: str) -> str:
    """The text of a packaged static file (``timeline.css``, ``timeline.js``); KeyError for any other name."""
    if name not in STATIC:
        raise KeyError(name)
    return resources.files("memledger.ui").joinpath("static", name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def value_text(v: dict[str, Any]) -> str:
    """What a version shows: its value (JSON for anything but a string), ``withheld (LABEL)``, or ``forgotten``
    (its value was shredded)."""
    if v.get("withheld"):
        return f"withheld ({v['withheld']})"
    if v.get("status") == "forgotten" and v.get("value") is None:
        return "forgotten"
    value = v.get("value")
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


#: the narrowest bar drawn, in percent of the track: a version replaced within a second is still a bar one can see,
#: hover and focus, and bars this close share no lane
MIN_BAR = 1.2


class Axis:
    """The valid-time axis: instants (ISO strings) -> percent of the track width, clamped to [0, 100].

    It spans the shown rows' instants up to ``now`` (later ones, scheduled far ahead, are drawn at the right
    edge with their date), with a small margin each side; it reaches ``now`` only when the data ends close to it.
    """

    def __init__(self, instants: list[str], now: str) -> None:
        now_dt = _dt(now)
        past = sorted(t for t in {_dt(x) for x in instants if x} if t <= now_dt)
        lo, hi = (past[0], past[-1]) if past else (now_dt, now_dt)
        if (now_dt - hi).total_seconds() <= (hi - lo).total_seconds() * NOW_REACH:
            hi = now_dt
        span = (hi - lo).total_seconds() or 86400.0
        self.lo = lo - timedelta(seconds=span * AXIS_MARGIN)
        self.hi_s = span * (1 + 2 * AXIS_MARGIN)

    def pct(self, instant: str | None, open_end: float = 100.0) -> float:
        """Where ``instant`` falls, in percent of the track (``open_end`` for an open end)."""
        if instant is None:
            return open_end
        x = (_dt(instant) - self.lo).total_seconds() / self.hi_s * 100
        return max(0.0, min(100.0, x))

    def labels(self, n: int = 6) -> list[tuple[float, str]]:
        """``n`` evenly spaced ``(percent, date)`` ticks; with the time of day when the axis spans under 3 days, the
        seconds when ticks fall under a minute apart (then the first tick gives the day too), and the milliseconds
        when they fall under a second apart: no two ticks alike."""
        step = self.hi_s / (n - 1)
        fmt = "%Y-%m-%d" if self.hi_s >= 3 * 86400 else "%m-%d %H:%M" if step >= 60 else "%H:%M:%S"
        out = []
        for i in range(n):
            at = self.lo + timedelta(seconds=self.hi_s * i / (n - 1))
            text = at.strftime(fmt) + (f".{at.microsecond // 1000:03d}" if step < 1 else "")  # versions ms apart
            # an axis of seconds or minutes says on which day, on its first tick
            out.append((i * 100 / (n - 1), at.strftime("%Y-%m-%d ") + text if i == 0 and step < 60 else text))
        return out


def _dt(s: str) -> datetime:
    return parse_instant(s, "instant")


def _lanes(bars: list[tuple[float, float]]) -> list[int]:
    """A lane per bar so that overlapping bars of one row stack instead of hiding each other."""
    ends: list[float] = []
    out = []
    for a, b in bars:
        for i, end in enumerate(ends):
            if a >= end:
                ends[i] = max(b, a + MIN_BAR)
                out.append(i)
                break
        else:
            ends.append(max(b, a + MIN_BAR))
            out.append(len(ends) - 1)
    return out


def _head(title: str, inline: bool, csp: str | None) -> str:
    parts = ['<!doctype html>\n<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             '<meta name="referrer" content="same-origin">',
             # an empty icon: the browser asks for no /favicon.ico
             '<link rel="icon" href="data:,">']
    if csp:
        parts.append(f'<meta http-equiv="Content-Security-Policy" content="{esc(csp)}">')
    parts.append(f"<title>{esc(title)}</title>")
    if inline:
        parts.append(f"<style>{static_text('timeline.css')}</style>")
    else:
        parts.append('<link rel="stylesheet" href="/ui/static/timeline.css">')
    parts.append("</head>")
    return "".join(parts)


def _legend() -> str:
    items = "".join(f'<li><span class="bar cat-{c} swatch"><span class="t">{esc(GLYPH[c])} {esc(CATEGORY_WORD[c])}'
                    "</span></span></li>" for c in CATEGORIES)
    return f'<section class="legend" aria-label="Legend"><h2>Legend</h2><ul>{items}</ul></section>'


def export_csp() -> str:
    """The Content-Security-Policy of an exported file: its own inline script and style, nothing fetched."""
    return (f"default-src 'none'; script-src '{_sha256(static_text('timeline.js'))}'; "
            f"style-src '{_sha256(static_text('timeline.css'))}'; img-src data:; base-uri 'none'; "
            "form-action 'none'")


def user_page(view: dict[str, Any], *, inline: bool = False) -> str:
    """The timeline page of one user (``view`` from :func:`memledger.ui.model.user_view`) as an HTML document.

    ``inline``: one self-contained file (script and style inside, a CSP allowing no fetch) for ``timeline --html``.
    """
    user = view["user_id"]
    csp = export_csp() if inline else None
    out = [_head(f"memledger: memory of {user}", inline, csp), "<body>"]
    out.append('<a class="skip" href="#rows">Skip to the timeline</a>')
    out.append(f'<header><h1>Memory of <span class="user">{esc(user)}</span></h1>')
    scope = view.get("scope") or {}
    if scope:  # a scoped timeline says so: it is not the whole memory
        said = [f"written by agent {scope['agent_id']}" if scope.get("agent_id") else "",
                f"in run {scope['run_id']}" if scope.get("run_id") else ""]
        out.append(f'<p class="scope">Only what was {esc(", ".join(x for x in said if x))}.</p>')
    if view["erased"]:
        r = view["erasure"]
        out.append("</header><main>")
        out.append('<section class="erased" id="erasure" aria-labelledby="erasure-h"><h2 id="erasure-h">Erasure '
                   f'receipt</h2><dl><dt>user</dt><dd>{esc(r["user_id"])}</dd><dt>erased at</dt>'
                   f'<dd>{esc(r["erased_at"])}</dd><dt>tombstone log position</dt><dd>{esc(r["position"])}</dd>'
                   f'<dt>key destroyed</dt><dd>{"yes" if r["key_destroyed"] else "no"}</dd></dl>'
                   f'<p>{esc(r["note"])}</p></section></main></body></html>')
        return "".join(out)
    n_versions = sum(len(k["versions"]) for k in view["keys"])
    out.append(f'<p class="meta">Drawn at {esc(view["generated_at"])} (UTC) from the ledger: {len(view["keys"])} '
               f'keys, {n_versions} versions, {len(view["sessions"])} sessions, {len(view["disclosures"])} '
               'disclosures. Bars span valid time (when a fact held in the world); the slider moves through '
               f'<span id="axis-word">{AXIS_WORD[view.get("default_axis") or "system"]}</span>.</p>')
    if not inline:
        out.append('<form method="post" action="/ui/logout" class="logout"><button type="submit">Sign out'
                   "</button></form>")
    out.append("</header><main>")
    observed = view.get("default_axis") == "observed"
    ticks = view["observed_ticks"] if observed else view["ticks"]
    last = len(ticks) - 1
    axis_name = "Observed time" if observed else "System time"
    checked = {"system": "" if observed else " checked", "observed": " checked" if observed else ""}
    out.append('<section class="slider" aria-labelledby="asof-h"><h2 id="asof-h">As we believed on '
               f'<output id="asof-out" for="asof">{esc(ticks[last])}</output></h2>'
               f'<input type="range" id="asof" min="0" max="{last}" step="1" value="{last}" '
               f'aria-label="{axis_name}: as we believed on" aria-valuetext="{esc(ticks[last])}">'
               '<p class="hint">Arrow keys step to the previous or next instant at which a belief changed. Each '
               'row then shows the value believed at that instant about that instant, as '
               '<code>memledger believed USER --as-of</code> answers.</p>'
               '<fieldset class="axis-choice"><legend>Time axis</legend><label><input type="radio" '
               f'name="axis" value="system"{checked["system"]}> system time: when the ledger recorded it</label> '
               f'<label><input type="radio" name="axis" value="observed"{checked["observed"]}> observed time: '
               'when it was said (imported history; <code>--axis observed</code>)</label>'
               + (' <span class="hint" id="axis-default-note">(observed time is shown first: most of this history '
                  'was said long before it was recorded)</span>' if observed else '') + '</fieldset>'
               '<form id="asof-form" class="asof-form"><label for="asof-text">Exact instant (ISO 8601 with an '
               'offset)</label> <input id="asof-text" type="text" inputmode="text" autocomplete="off" '
               f'spellcheck="false" value="{esc(ticks[last])}"> <button type="submit">Show</button> '
               '<span id="asof-error" class="error" role="alert"></span></form></section>')
    out.append(_legend())
    instants = [x for k in view["keys"] for v in k["versions"] for x in (v["bar_from"], v["bar_to"])]
    instants += [s["started_at"] for s in view["sessions"]] + [s["last_at"] for s in view["sessions"]]
    instants += [d["recorded_at"] for d in view["disclosures"]]
    instants += [x for p in view.get("people", []) for x in (p["valid_from"], p["valid_to"])]
    axis = Axis([x for x in instants if x], view["generated_at"])
    labels = "".join(f'<span class="tick" data-x="{x:.3f}">{esc(t)}</span>' for x, t in axis.labels())
    n_rows = len(view["keys"])
    out.append('<section class="chart" id="rows" aria-labelledby="rows-h"><h2 id="rows-h">Facts, one row per key, '
               'grouped by attribute, the latest said first</h2>'
               '<div class="filter" role="search"><label for="row-filter">Filter rows</label> <input '
               'id="row-filter" type="search" autocomplete="off" spellcheck="false" placeholder="name or value" '
               'aria-describedby="filter-count"> <span id="filter-count" class="hint" aria-live="polite">'
               f'{n_rows} of {n_rows} rows</span></div>'
               '<div class="axis" aria-hidden="true"><span class="rowlabel"></span>'
               f'<div class="track axis-track">{labels}</div></div>')
    out.append('<div class="cursor-wrap" aria-hidden="true"><span class="rowlabel"></span><div class="track '
               'cursor-track"><span id="cursor" class="cursor" data-x="100"></span></div></div>')
    by_key = {k["key"]: k for k in view["keys"]}
    for i, g in enumerate(view.get("groups") or [{"group": "", "keys": list(by_key)}]):
        n = len(g["keys"])
        title = "free-text memories" if g["group"] == FREE_TEXT_GROUP else g["group"]
        out.append(f'<div class="group" role="group" data-group="{esc(g["group"])}" aria-labelledby="group-{i}">'
                   f'<h3 class="group-h" id="group-{i}">{esc(title)} <span class="count">({n} '
                   f'row{"" if n == 1 else "s"})</span></h3>')
        out.extend(_key_row(by_key[key], axis) for key in g["keys"])
        out.append("</div>")
    out.append(_sessions_lane(view, axis))
    out.append(_people_lane(view, axis))
    out.append(_disclosures_lane(view, axis))
    out.append("</section>")
    out.append('<section id="audit" class="audit" tabindex="-1" aria-live="polite" aria-labelledby="audit-h">'
               '<h2 id="audit-h">Audit</h2><p id="audit-empty">Choose a version, a session, a relation or a '
               'disclosure (click it, or Tab to it and press Enter) to see its events and provenance here.</p>'
               '<div id="audit-body"></div></section>')
    out.append('<div id="bar-tip" class="tip" role="tooltip" hidden></div>')
    out.append("</main>")
    data = {k: view.get(k, []) for k in ("user_id", "generated_at", "keys", "sessions", "people", "disclosures",
                                         "ticks", "observed_ticks", "default_axis")}
    data["axis"] = {"from": axis.lo.isoformat().replace("+00:00", "Z"), "span_seconds": axis.hi_s}
    out.append(f'<script type="application/json" id="ml-data">{json_for_script(data)}</script>')
    if inline:
        out.append(f"<script>{static_text('timeline.js')}</script>")
    else:
        out.append('<script src="/ui/static/timeline.js"></script>')
    out.append("</body></html>")
    return "".join(out)


def _bar(cls: str, a: float, b: float, lane: int, attrs: str, label: str, text: str) -> str:
    width = max(b - a, MIN_BAR)
    return (f'<button type="button" class="bar {cls}" data-x="{a:.3f}" data-w="{width:.3f}" data-lane="{lane}" '
            f'{attrs} aria-label="{esc(label)}"><span class="t">{esc(text)}</span></button>')


def _key_row(k: dict[str, Any], axis: Axis) -> str:
    key = k["key"]
    # a free-text memory's key is a digest: its bars are read out by what it is, its text follows as the value
    who = key if (k.get("name") or key) == key else "free-text memory"
    spans = []
    for v in k["versions"]:
        a = axis.pct(v["bar_from"])
        b = axis.pct(v["bar_to"])
        spans.append((a, max(b, a)))
    bars = []
    for i, (a, b) in enumerate(spans):
        if a >= 99.0:  # starts beyond the axis (scheduled far ahead): drawn at the right edge, its date in words
            spans[i] = (92.0, 100.0)
    lanes = _lanes(spans)
    for v, (a, b), lane in zip(k["versions"], spans, lanes):
        cat = v["category"]
        value = value_text(v)
        until = v["bar_to"] or "open"
        label = (f"{who} version {v['version']}: {value}; {v['word']}; valid {v['bar_from']} to {until}; "
                 f"recorded {v['recorded_at']}")
        text = f"{GLYPH[cat]} {v['word']}: {value}"
        if v["bar_from"] and axis.pct(v["bar_from"]) >= 99.0:
            text += f" (from {v['bar_from'][:10]})"
        attrs = (f'data-key="{esc(key)}" data-version="{v["version"]}" data-recorded="{esc(v["recorded_at"])}" '
                 f'data-observed="{esc(v["observed_at"] or v["recorded_at"])}" title="{esc(label)}"')
        bars.append(_bar(f"cat-{cat}", a, b, lane, attrs, label, text))
    height = max(lanes, default=0) + 1
    name = k.get("name") or key
    shown = (f'<span class="key">{esc(key)}</span>' if name == key else
             f'<span class="key name" title="{esc(key)}">{esc(name)}</span>')
    return (f'<div class="row" data-key="{esc(key)}"><div class="rowlabel">{shown} '
            f'<span class="believed" data-believed="{esc(key)}"></span></div><div class="track" '
            f'data-lanes="{height}">{"".join(bars)}</div></div>')


def session_tag(session_id: str) -> str:
    """A session's id as short as it stays telling: the part after its last ``:`` or ``/`` (``session_1`` of
    ``conv-30:session_1``), the whole id when that part is empty."""
    tail = session_id.replace("/", ":").rsplit(":", 1)[-1]
    return tail or session_id


def _sessions_lane(view: dict[str, Any], axis: Axis) -> str:
    """A bar per session from its start to its end (or last message), labelled with its short id and message
    count; the script widens each bar to its label and stacks the ones that would overlap."""
    spans, items = [], []
    for s in view["sessions"]:
        a = axis.pct(s["started_at"])
        b = axis.pct(s["ended_at"] or s["last_at"] or s["started_at"])
        spans.append((a, max(a, b)))
    lanes = _lanes(spans)
    for i, (s, (a, b), lane) in enumerate(zip(view["sessions"], spans, lanes)):
        n = len(s["messages"])
        words = f"{n} message{'' if n == 1 else 's'}"
        label = f"session {s['session_id']}: {words}, {s['started_at']} to {s['ended_at'] or s['last_at']}"
        items.append(_bar("session", a, b, lane, f'data-session="{i}" data-fit="label" title="{esc(label)}"',
                          label, f"\u25a4 {session_tag(s['session_id'])} \u00b7 {words}"))
    marks = []
    for s in view["sessions"]:
        for m in s["messages"]:
            marks.append(f'<span class="msg" data-x="{axis.pct(m["observed_at"]):.3f}" aria-hidden="true"></span>')
    height = max(lanes, default=0) + 2
    empty = "" if items else '<span class="none">no sessions or messages</span>'
    count = f" ({len(items)})" if items else ""
    return ('<div class="row lane" data-lane-name="sessions"><div class="rowlabel"><span class="key">Sessions and '
            f'messages{count}</span></div><div class="track" data-lanes="{height}">{"".join(items)}'
            f'<div class="msgs" data-lane="{height - 1}">{"".join(marks)}</div>{empty}</div></div>')


def _people_lane(view: dict[str, Any], axis: Axis) -> str:
    """A bar per relation version over its valid range ("sister Anna", "manager_of Omar"; superseded ones end where
    the next began), stacked so that overlapping ones show; a labelled one not allowed shows its label only."""
    people = view.get("people", [])
    spans = [(axis.pct(p["valid_from"]), max(axis.pct(p["valid_from"]), axis.pct(p["valid_to"]))) for p in people]
    lanes = _lanes(spans)
    items = []
    for i, (p, (a, b), lane) in enumerate(zip(people, spans, lanes)):
        who = f"withheld ({p['withheld']})" if p["withheld"] else f"{p['relation_type']} {p['entity']}"
        of = "" if p["subject"] in (None, "user") else f" of {p['subject']}"
        label = (f"relation {who}{of}, {p['status']}: valid {p['valid_from']} to {p['valid_to'] or 'open'}; "
                 f"recorded {p['recorded_at']}")
        items.append(_bar(f"person st-{esc(p['status'] or '')}", a, b, lane,
                          f'data-person="{i}" title="{esc(label)}"', label, f"\u263a {who}{of}"))
    height = max(lanes, default=0) + 1
    empty = "" if items else '<span class="none">no people or relations</span>'
    return ('<div class="row lane" data-lane-name="people"><div class="rowlabel"><span class="key">People and '
            f'relations</span></div><div class="track" data-lanes="{height}">{"".join(items)}{empty}</div></div>')


def _disclosures_lane(view: dict[str, Any], axis: Axis) -> str:
    items = []
    for i, d in enumerate(view["disclosures"]):
        a = axis.pct(d["recorded_at"])
        label = (f"disclosure: {d['key']} v{d['version']} ({d['sensitivity']}) let into a context at "
                 f"{d['recorded_at']}")
        items.append(_bar("disclosure", a, a, 0, f'data-disclosure="{i}" data-fit="label" title="{esc(label)}"', label,
                          f"\u25c9 {d['key']} ({d['sensitivity']})"))
    lanes = _lanes([(axis.pct(d["recorded_at"]), axis.pct(d["recorded_at"]) + 12) for d in view["disclosures"]])
    items = [s.replace('data-lane="0"', f'data-lane="{lane}"', 1) for s, lane in zip(items, lanes)]
    empty = "" if items else '<span class="none">no sensitive fact was let into a context</span>'
    return ('<div class="row lane" data-lane-name="disclosures"><div class="rowlabel"><span class="key">'
            'Disclosures (sensitive facts let into a context)</span></div><div class="track" '
            f'data-lanes="{max(lanes, default=0) + 1}">{"".join(items)}{empty}</div></div>')


# -- health --------------------------------------------------------------------------------------------------------
#: (figure, chart title, whole numbers?, what the y axis counts)
METRICS = (("freshness_7d", "Freshness (share of current facts confirmed in the last 7 days)", False, "share"),
           ("conflict_rate", "Conflict rate (contested share of current facts)", False, "share"),
           ("correction_rate_per_1k_messages", "Corrections per 1000 messages", False, "per 1000 messages"),
           ("quarantined", "Quarantined statements pending", True, "statements"),
           ("due", "Facts due for re-confirmation", True, "facts"))
#: the most users the health page links to by name (a larger store: open /ui/users/ID)
USER_LINKS = 500


def health_page(view: dict[str, Any]) -> str:
    """The store's memory health (``view`` from :func:`memledger.ui.model.health_view`): one full-width chart per
    metric (inline SVG with ticks on both axes, its numbers in a table under it), the users with the most
    conflicts, and a link to each user's timeline."""
    out = [_head("memledger: memory health", False, None), "<body>",
           '<header><h1>Memory health</h1>'
           f'<p class="meta">Drawn at {esc(view["generated_at"])} (UTC); {view["users"]} user{"" if view["users"] == 1 else "s"} hold{"s" if view["users"] == 1 else ""} beliefs. '
           f'{len(view["series"])} instants from the first statement (when it was said) to now, each as '
           '<code>memledger stats --now</code> reports it.</p>'
           '<form method="post" action="/ui/logout" class="logout"><button type="submit">Sign out</button></form>'
           "</header><main>"]
    series = view["series"]
    if not series:
        out.append("<p>No fact has been recorded yet.</p>")
    for name, title, whole, unit in METRICS:
        out.append(_chart(name, title, series, whole, unit))
    rows = "".join(f'<tr><th scope="row">{_user_link(r["user_id"])}</th>'
                   f'<td>{r["contested_now"]}</td><td>{r["beliefs_now"]}</td><td>{r["contests_recorded"]}</td></tr>'
                   for r in view["top_conflicts"])
    out.append('<section aria-labelledby="top-h"><h2 id="top-h">Users with the most conflicts</h2>'
               '<table class="numbers" id="top-conflicts"><thead><tr><th scope="col">user</th><th scope="col">'
               'contested beliefs now</th><th scope="col">beliefs now</th><th scope="col">contests recorded'
               f'</th></tr></thead><tbody>{rows or "<tr><td colspan=4>no conflicts</td></tr>"}</tbody></table>'
               "</section>")
    ids = view.get("user_ids") or []
    links = "".join(f"<li>{_user_link(u)}</li>" for u in ids[:USER_LINKS])
    more = (f'<p class="hint">and {len(ids) - USER_LINKS} more: open <code>/ui/users/USER</code>.</p>'
            if len(ids) > USER_LINKS else "")
    out.append('<section aria-labelledby="users-h"><h2 id="users-h">Timelines</h2><ul class="users" id="user-links">'
               f'{links or "<li>no user holds a belief</li>"}</ul>{more}</section></main></body></html>')
    return "".join(out)


def _user_link(user_id: str) -> str:
    path = user_path(user_id)
    if path is None:
        return f'{esc(user_id)} <span class="none">(memledger timeline)</span>'
    return f'<a href="{esc(path)}">{esc(user_id)}</a>'


def axis_figure(value: float) -> str:
    """A y-axis figure in a few characters (3 significant digits, whole numbers from 100): ``1.35``, ``0.5``,
    ``1234``, so it fits left of the axis."""
    if value >= 100:
        return str(int(round(value)))
    text = f"{value:.3g}"
    return text if "e" not in text else f"{value:.2f}"


def nice_ticks(top: float, whole: bool, most: int = 5) -> list[float]:
    """Round y-axis ticks from 0 to at least ``top``: steps of 1, 2 or 5 times a power of ten, at most ``most``
    steps (at least two), whole steps for counts (``nice_ticks(0.37, False)`` -> 0, 0.1, 0.2, 0.3, 0.4;
    ``nice_ticks(1, True)`` -> 0, 1, 2)."""
    import math

    top = top if top > 0 else 1.0
    raw = top / most
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    if whole:
        step = max(1.0, float(round(step)))
    count = max(2, math.ceil(top / step - 1e-9))  # three figures at least, so the scale reads
    return [round(i * step, 10) for i in range(count + 1)]


def _chart(name: str, title: str, series: list[dict[str, Any]], whole: bool, unit: str) -> str:
    # the drawing is scaled to the page's width; these are its own units (left: room for the y figures and title)
    w, h, top_pad, right, bottom, left = 1000, 230, 14, 26, 52, 88
    values = [s[name] for s in series]
    known = [v for v in values if v is not None]
    yt = nice_ticks(max(known + [0]) or (1 if whole else 1.0), whole)
    top = yt[-1]
    plot_w, plot_h = w - left - right, h - top_pad - bottom
    n = max(len(series) - 1, 1)

    def x_of(i: int) -> float:
        return left + plot_w * i / n

    def y_of(v: float) -> float:
        return h - bottom - plot_h * (v / top)

    pts, dots = [], []
    for i, v in enumerate(values):
        if v is None:
            continue
        pts.append(f"{x_of(i):.1f},{y_of(v):.1f}")
        dots.append(f'<circle cx="{x_of(i):.1f}" cy="{y_of(v):.1f}" r="3"><title>{esc(series[i]["at"])}: '
                    f"{esc(v)}</title></circle>")
    parts = [f'<svg viewBox="0 0 {w} {h}" role="img" aria-labelledby="{name}-h" class="spark" '
             'preserveAspectRatio="xMidYMid meet">']
    for v in yt:  # y ticks: a faint grid line and the figure
        y = y_of(v)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{w - right}" y2="{y:.1f}" class="grid"/>'
                     f'<line x1="{left - 5}" y1="{y:.1f}" x2="{left}" y2="{y:.1f}" class="ax"/>'
                     f'<text class="ytick" x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">'
                     f"{esc(axis_figure(v))}</text>")
    if series:  # x ticks: up to 6 instants of the series, the first and the last among them
        span = (_dt(series[-1]["at"]) - _dt(series[0]["at"])).total_seconds()
        cut = 10 if span >= 3 * 86400 else 16
        picks = sorted({round(j * (len(series) - 1) / 5) for j in range(6)}) if len(series) > 1 else [0]
        for i in picks:
            anchor = "start" if i == 0 and len(series) > 1 else "end" if i == len(series) - 1 else "middle"
            parts.append(f'<line x1="{x_of(i):.1f}" y1="{h - bottom}" x2="{x_of(i):.1f}" y2="{h - bottom + 5}" '
                         f'class="ax"/><text class="xtick" x="{x_of(i):.1f}" y="{h - bottom + 18}" '
                         f'text-anchor="{anchor}">{esc(series[i]["at"][:cut].replace("T", " "))}</text>')
    parts.append(f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" class="ax"/>'
                 f'<line x1="{left}" y1="{top_pad}" x2="{left}" y2="{h - bottom}" class="ax"/>'
                 f'<text class="xtitle" x="{left + plot_w / 2:.1f}" y="{h - 8}" text-anchor="middle">'
                 'when (UTC)</text>'
                 f'<text class="ytitle" x="14" y="{top_pad + plot_h / 2:.1f}" text-anchor="middle" '
                 f'transform="rotate(-90 14 {top_pad + plot_h / 2:.1f})">{esc(unit)}</text>'
                 f'<polyline points="{" ".join(pts)}" class="line"/>{"".join(dots)}</svg>')
    cells = "".join(f"<tr><td>{esc(s['at'][:19])}Z</td><td>{'n/a' if s[name] is None else esc(s[name])}</td></tr>"
                    for s in series)
    return (f'<section class="metric" id="metric-{name}" aria-labelledby="{name}-h"><h2 id="{name}-h">'
            f'{esc(title)}</h2>{"".join(parts)}<details><summary>Numbers</summary><table class="numbers"><thead>'
            f'<tr><th scope="col">at (UTC)</th><th scope="col">{esc(name)}</th></tr></thead><tbody>{cells}</tbody>'
            "</table></details></section>")


def login_page(next_path: str, problem: str | None = None) -> str:
    """The sign-in form: an API key that may read the user (kept in an HttpOnly, SameSite=Strict cookie)."""
    msg = f'<p class="error" role="alert">{esc(problem)}</p>' if problem else ""
    # the script copies the page's #fragment (as_of, axis) into "next": a fragment never reaches the server
    return (_head("memledger: sign in", False, None) + "<body><main class=\"login\"><h1>Sign in</h1>"
            "<p>Paste an API key that may read the user (<code>memledger keys create --user U</code>). It is kept in "
            "a cookie this page cannot read from script, sent only to <code>/ui</code> pages, and never accepted "
            f"by the API.</p>{msg}<form method=\"post\" action=\"/ui/login\" id=\"login-form\"><input "
            f"type=\"hidden\" name=\"next\" value=\"{esc(next_path)}\"><label for=\"key\">API key</label> <input "
            "id=\"key\" name=\"key\" type=\"password\" autocomplete=\"off\" required size=\"60\"> <button "
            "type=\"submit\">Sign in</button></form></main><script src=\"/ui/static/timeline.js\"></script>"
            "</body></html>")


def message_page(title: str, text: str, next_path: str | None = None) -> str:
    """A small page for a refusal (403, 404, 422) in the UI's style; its sign-in link returns to ``next_path``
    (a percent-encoded ``/ui`` path: the page that was refused)."""
    login = "/ui/login" + (f"?next={urllib.parse.quote(next_path, safe='/')}" if next_path else "")
    return (_head(f"memledger: {title}", False, None) + f'<body><main class="login"><h1>{esc(title)}</h1>'
            f'<p>{esc(text)}</p><p><a href="{esc(login)}">Sign in with another key</a></p></main></body></html>')
