"""GET /: one page to try the served model, in a browser, offline: no build step, no CDN, nothing but this file.

A source box, the target language (from /languages), the translation as you type (300 ms after the last
key), the model's name and figures (from /info), and any error as the server's own sentence. A file (of the
formats /frontend/settings lists) chosen in its input is sent to /translate_file and its translation offered
as a link to download, by the link's path on this same server. When the
server has an API key, /info answers 401 and the page asks for the key, keeps it for the tab
(sessionStorage) and sends it as `Authorization: Bearer`. The page talks to the endpoints of
LibreTranslate's API on the same server (mtkit/serve/libretranslate.py), so what it shows is what those
clients get. Its script and style are inline, allowed by their hashes in the Content-Security-Policy: the
page may load nothing from anywhere, and run no other script.
"""

from __future__ import annotations

import base64
import hashlib

STYLE = """
body { font: 16px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 60rem; padding: 1rem; color: #1b1b1b; }
h1 { font-size: 1.3rem; margin: 0 0 .25rem; }
#model { color: #555; font-size: .9rem; margin-bottom: 1rem; min-height: 1.2em; }
.row { display: flex; gap: 1rem; flex-wrap: wrap; }
.col { flex: 1 1 20rem; display: flex; flex-direction: column; gap: .4rem; }
textarea, #translation { box-sizing: border-box; width: 100%; min-height: 10rem; font: inherit; padding: .6rem;
  border: 1px solid #bbb; border-radius: 6px; }
#translation { background: #f6f6f6; white-space: pre-wrap; }
select, input { font: inherit; padding: .2rem; }
#error { color: #a40000; min-height: 1.2em; }
#status { color: #555; font-size: .85rem; min-height: 1em; }
#files { margin-top: 1rem; display: flex; gap: .6rem; align-items: center; flex-wrap: wrap; }
#keybox { display: none; margin-bottom: 1rem; padding: .6rem; border: 1px solid #d8a400; border-radius: 6px;
  background: #fff8e0; }
"""

SCRIPT = """
"use strict";
const $ = (id) => document.getElementById(id);
let key = sessionStorage.getItem("mtkit-api-key") || "";
let pairs = {};
let timer = null, asked = 0;

async function call(path, body) {
  const form = body instanceof FormData;  // a file: multipart, its boundary set by fetch
  const headers = form ? {} : {"Content-Type": "application/json"};
  if (key) headers["Authorization"] = "Bearer " + key;
  const init = body === undefined ? {headers} : {method: "POST", headers, body: form ? body : JSON.stringify(body)};
  const response = await fetch(path, init);
  let data = null;
  try { data = await response.json(); } catch (e) { data = null; }
  if (!response.ok) {
    const error = new Error((data && data.error) || response.status + " " + response.statusText);
    error.status = response.status;
    throw error;
  }
  return data;
}

function showError(message) { $("error").textContent = message || ""; }
function askForKey(show) { $("keybox").style.display = show ? "block" : "none"; }

function describe(info) {
  const m = (info.models && info.models[0]) || {};
  const parts = [info.model];
  if (m.parameters) parts.push((m.parameters / 1e6).toFixed(1) + "M parameters");
  if (m.step) parts.push("step " + m.step);
  if (info.languages && info.languages.length) parts.push(info.languages.join(", "));
  parts.push(info.device + ", " + info.precision);
  return parts.join(" · ");
}

async function loadInfo() {
  try {
    $("model").textContent = describe(await call("/info"));
    askForKey(false);
    return true;
  } catch (e) {
    if (e.status === 401) { askForKey(true); $("model").textContent = ""; } else { showError(e.message); }
    return false;
  }
}

async function loadLanguages() {
  try {
    const languages = await call("/languages");
    pairs = {};
    const sources = $("source-lang"), targets = $("target-lang");
    sources.textContent = "";
    for (const lang of languages.filter((l) => l.targets.length)) {
      pairs[lang.code] = lang.targets;
      sources.append(new Option(lang.name + " (" + lang.code + ")", lang.code));
    }
    if (sources.options.length > 1) sources.prepend(new Option("Detect", "auto", true, true));
    const names = Object.fromEntries(languages.map((l) => [l.code, l.name]));
    const all = [...new Set(Object.values(pairs).flat())];
    targets.textContent = "";
    for (const code of all) targets.append(new Option((names[code] || code) + " (" + code + ")", code));
    if (!all.length) showError("the server lists no languages; start it with --languages, e.g. en-de.");
  } catch (e) { showError(e.message); }
}

async function translate() {
  const q = $("source").value;
  const mine = ++asked;
  if (!q.trim()) { $("translation").textContent = ""; $("status").textContent = ""; return; }
  $("status").textContent = "translating…";
  const started = performance.now();
  try {
    const answer = await call("/translate",
      {q, source: $("source-lang").value || "auto", target: $("target-lang").value, format: "text"});
    if (mine !== asked) return;
    $("translation").textContent = answer.translatedText;
    $("status").textContent = Math.round(performance.now() - started) + " ms";
    showError("");
  } catch (e) {
    if (mine !== asked) return;
    $("status").textContent = "";
    showError(e.message);
    if (e.status === 401) askForKey(true);
  }
}

function later() { clearTimeout(timer); timer = setTimeout(translate, 300); }

async function loadFormats() {
  try {
    const settings = await call("/frontend/settings");
    $("file").accept = (settings.supportedFilesFormat || []).join(",");
  } catch (e) { showError(e.message); }
}

async function translateFile() {
  const file = $("file").files[0], link = $("download");
  link.hidden = true;
  if (!file) return;
  const form = new FormData();
  form.append("file", file, file.name);
  form.append("source", $("source-lang").value || "auto");
  form.append("target", $("target-lang").value);
  $("file-status").textContent = "translating " + file.name + "…";
  try {
    const answer = await call("/translate_file", form);
    link.href = new URL(answer.translatedFileUrl, location.href).pathname;  // this server, as the page reached it
    link.download = file.name;
    link.textContent = "Download " + file.name + ", translated";
    link.hidden = false;
    $("file-status").textContent = "";
    showError("");
  } catch (e) {
    $("file-status").textContent = "";
    showError(e.message);
    if (e.status === 401) askForKey(true);
  }
}

$("source").addEventListener("input", later);
$("source-lang").addEventListener("change", translate);
$("target-lang").addEventListener("change", translate);
$("file").addEventListener("change", translateFile);
$("key").addEventListener("change", async () => {
  key = $("key").value.trim();
  sessionStorage.setItem("mtkit-api-key", key);
  showError("");
  if (await loadInfo()) translate();
});
loadInfo();
loadLanguages();
loadFormats();
"""

BODY = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mtkit: try the model</title>
<style>{style}</style>
</head>
<body>
<h1>Try the model</h1>
<div id="model" aria-live="polite"></div>
<div id="keybox">
  <label for="key">This server needs an API key:</label>
  <input id="key" type="password" autocomplete="off" size="40" placeholder="the key in --api-key-file">
</div>
<div class="row">
  <div class="col">
    <label>From <select id="source-lang" aria-label="source language"></select></label>
    <textarea id="source" placeholder="Type a sentence" autofocus></textarea>
  </div>
  <div class="col">
    <label>Into <select id="target-lang" aria-label="target language"></select></label>
    <div id="translation" aria-live="polite"></div>
    <div id="status"></div>
  </div>
</div>
<div id="files">
  <label for="file">Or a file:</label>
  <input id="file" type="file">
  <span id="file-status" aria-live="polite"></span>
  <a id="download" hidden></a>
</div>
<div id="error" role="alert"></div>
<script>{script}</script>
</body>
</html>
"""


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


PAGE = BODY.format(style=STYLE, script=SCRIPT)
HEADERS = {
    "Content-Security-Policy": (
        f"default-src 'none'; script-src {_hash(SCRIPT)}; style-src {_hash(STYLE)}; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
