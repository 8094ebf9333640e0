/* replicad chat widget. Include on a page:
 *   <script src="https://YOUR-REPLICAD/embed/widget.js" data-replica="REPLICA-UUID"
 *           data-key="rpl_embed_..." data-name="Docs helper" defer></script>
 * Options (data-*): replica (required), key (the public embed key), name, title, greeting,
 * placeholder, launcher-label, color (the accent, any CSS colour), position ("left" or "right"),
 * lang (en, fr, es, de, ja; default: the page's), identity (a token signed by the site's backend,
 * see docs/channels.md), api (the server's base URL; default: where this script comes from), mode
 * ("page": the whole page is the chat, in the element whose id is data-target), and for the page:
 * description, image, questions (a JSON array of suggested questions).
 * JavaScript API: window.replicad.open(), .close(), .ask(text), .identify(token).
 * No inline script, no eval, no HTML parsing: answers are Markdown turned into DOM nodes from the
 * tokens of the vendored `marked` lexer, raw HTML in them shown as text, images never loaded.
 * Styles are one constructed stylesheet adopted by the widget's shadow root, so the page's CSS
 * does not reach the widget and a strict Content-Security-Policy (no 'unsafe-inline') holds. */
(function () {
  "use strict";
  var script = document.currentScript;
  if (!script || !script.dataset.replica) {
    return;
  }
  var cfg = script.dataset;
  var replica = cfg.replica;
  var api = (cfg.api || new URL(script.src, location.href).origin).replace(/\/+$/, "");
  var pageMode = cfg.mode === "page";
  var name = cfg.name || "Assistant";
  var visitorKey = "replicad-visitor-" + replica;
  var identity = cfg.identity || null;

  var STRINGS = {
    en: {
      message: "Your message", placeholder: "Ask a question…", send: "Send", stop: "Stop", retry: "Retry",
      open: "Open chat with {name}", close: "Close chat", chatWith: "Chat with {name}", log: "Conversation",
      you: "You", typing: "{name} is writing…", sources: "Sources", source: "Source {n}: {name}", copy: "Copy",
      copied: "Copied", stopped: "Stopped", failed: "The answer could not be completed.",
      unavailable: "The chat is not available right now.", suggested: "Suggested questions", image: "Image",
      launcher: "Chat", closePassage: "Close source", openPage: "Open the page", page: "p. {n}",
    },
    fr: {
      message: "Votre message", placeholder: "Posez une question…", send: "Envoyer", stop: "Arrêter",
      retry: "Réessayer", open: "Ouvrir la discussion avec {name}", close: "Fermer la discussion",
      chatWith: "Discussion avec {name}", log: "Conversation", you: "Vous", typing: "{name} écrit…",
      sources: "Sources", source: "Source {n} : {name}", copy: "Copier", copied: "Copié", stopped: "Arrêté",
      failed: "La réponse n’a pas pu être terminée.", unavailable: "La discussion n’est pas disponible pour le moment.",
      suggested: "Questions suggérées", image: "Image", launcher: "Discuter", closePassage: "Fermer la source",
      openPage: "Ouvrir la page", page: "p. {n}",
    },
    es: {
      message: "Tu mensaje", placeholder: "Haz una pregunta…", send: "Enviar", stop: "Detener", retry: "Reintentar",
      open: "Abrir el chat con {name}", close: "Cerrar el chat", chatWith: "Chat con {name}", log: "Conversación",
      you: "Tú", typing: "{name} está escribiendo…", sources: "Fuentes", source: "Fuente {n}: {name}",
      copy: "Copiar", copied: "Copiado", stopped: "Detenido", failed: "No se pudo completar la respuesta.",
      unavailable: "El chat no está disponible en este momento.", suggested: "Preguntas sugeridas",
      image: "Imagen", launcher: "Chat", closePassage: "Cerrar la fuente", openPage: "Abrir la página",
      page: "p. {n}",
    },
    de: {
      message: "Ihre Nachricht", placeholder: "Stellen Sie eine Frage…", send: "Senden", stop: "Stopp",
      retry: "Erneut versuchen", open: "Chat mit {name} öffnen", close: "Chat schließen", chatWith: "Chat mit {name}",
      log: "Unterhaltung", you: "Sie", typing: "{name} schreibt…", sources: "Quellen", source: "Quelle {n}: {name}",
      copy: "Kopieren", copied: "Kopiert", stopped: "Angehalten", failed: "Die Antwort konnte nicht abgeschlossen werden.",
      unavailable: "Der Chat ist gerade nicht verfügbar.", suggested: "Vorgeschlagene Fragen", image: "Bild",
      launcher: "Chat", closePassage: "Quelle schließen", openPage: "Seite öffnen", page: "S. {n}",
    },
    ja: {
      message: "メッセージ", placeholder: "質問を入力…", send: "送信", stop: "停止", retry: "再試行",
      open: "{name}とのチャットを開く", close: "チャットを閉じる", chatWith: "{name}とのチャット", log: "会話",
      you: "あなた", typing: "{name}が入力中…", sources: "出典", source: "出典 {n}: {name}", copy: "コピー",
      copied: "コピーしました", stopped: "停止しました", failed: "回答を完了できませんでした。",
      unavailable: "現在チャットは利用できません。", suggested: "おすすめの質問", image: "画像", launcher: "チャット",
      closePassage: "出典を閉じる", openPage: "ページを開く", page: "{n}ページ",
    },
  };
  // The site's language, or on the chat page (which is ours) the visitor's.
  var pageLang = pageMode ? null : document.documentElement.lang;
  var lang = (cfg.lang || pageLang || navigator.language || "en").slice(0, 2).toLowerCase();
  var strings = STRINGS[lang] || STRINGS.en;
  lang = strings === STRINGS.en ? "en" : lang;
  if (pageMode) {
    document.documentElement.lang = lang;
  }
  // `strings[key]` with its {placeholders} filled from `values`, {name} by default the replica's.
  function t(key, values) {
    return strings[key].replace(/\{(\w+)\}/g, function (_, k) { return values && k in values ? values[k] : name; });
  }

  function visitorId() {
    var v = null;
    try {
      v = window.localStorage.getItem(visitorKey);
    } catch (e) {
      v = null;
    }
    if (!v || !/^[A-Za-z0-9_-]{8,100}$/.test(v)) {
      if (window.crypto && window.crypto.randomUUID) {
        v = window.crypto.randomUUID();
      } else {
        var bytes = new Uint8Array(16);
        window.crypto.getRandomValues(bytes);
        v = Array.prototype.map.call(bytes, function (b) { return ("0" + b.toString(16)).slice(-2); }).join("");
      }
      try {
        window.localStorage.setItem(visitorKey, v);
      } catch (e) { /* private mode: the conversation lasts as long as the page */ }
    }
    return v;
  }

  function headers(extra) {
    var h = { "x-embed-visitor": visitorId() };
    if (cfg.key) {
      h["x-embed-key"] = cfg.key;
    }
    if (identity) {
      h["x-embed-identity"] = identity;
    }
    for (var k in extra) {
      h[k] = extra[k];
    }
    return h;
  }

  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) {
      if (k === "text") {
        e.textContent = attrs[k];
      } else if (attrs[k] !== null && attrs[k] !== undefined) {
        e.setAttribute(k, attrs[k]);
      }
    }
    (children || []).forEach(function (c) { e.appendChild(c); });
    return e;
  }

  // ---- Markdown: marked's tokens to DOM nodes -------------------------------------------------

  // An http(s) or mailto URL for a link; null for anything else (javascript:, data:, …).
  function safeUrl(href) {
    try {
      var u = new URL(href, api + "/");
      return /^(https?|mailto):$/.test(u.protocol) ? u.href : null;
    } catch (e) {
      return null;
    }
  }

  function link(href, title, children) {
    var url = safeUrl(href);
    if (!url) {
      return el("span", {}, children);
    }
    return el("a", { href: url, title: title || null, target: "_blank", rel: "noopener noreferrer" }, children);
  }

  function inline(tokens) {
    var out = [];
    (tokens || []).forEach(function (tk) {
      switch (tk.type) {
        case "strong": out.push(el("strong", {}, inline(tk.tokens))); break;
        case "em": out.push(el("em", {}, inline(tk.tokens))); break;
        case "del": out.push(el("del", {}, inline(tk.tokens))); break;
        case "codespan": out.push(el("code", { text: tk.text })); break;
        case "br": out.push(el("br")); break;
        case "link": out.push(link(tk.href, tk.title, inline(tk.tokens))); break;
        // never loaded: an answer must not send the conversation to another host in an image URL
        case "image": out.push(link(tk.href, tk.title, [document.createTextNode(t("image") + ": " + (tk.text || tk.href))])); break;
        case "text": out.push.apply(out, tk.tokens ? inline(tk.tokens) : [document.createTextNode(tk.text)]); break;
        default: out.push(document.createTextNode(tk.text !== undefined ? tk.text : tk.raw || ""));
      }
    });
    return out;
  }

  function codeBlock(tk) {
    var code = el("code", { text: tk.text, class: tk.lang ? "language-" + tk.lang.split(/\s/)[0] : null });
    var copy = el("button", { type: "button", class: "copy", "data-replicad": "copy", text: t("copy") });
    copy.addEventListener("click", function () {
      copyText(tk.text).then(function () {
        copy.textContent = t("copied");
        setTimeout(function () { copy.textContent = t("copy"); }, 1500);
      });
    });
    return el("div", { class: "code" }, [el("pre", { tabindex: "0" }, [code]), copy]);
  }

  function copyText(text) {
    if (navigator.clipboard && navigator.clipboard.writeText) {
      return navigator.clipboard.writeText(text);
    }
    return Promise.reject(new Error("no clipboard"));
  }

  function table(tk) {
    function row(cells, tag) {
      return el("tr", {}, cells.map(function (c, i) {
        return el(tag, { class: tk.align[i] ? "align-" + tk.align[i] : null }, inline(c.tokens));
      }));
    }
    var head = el("thead", {}, [row(tk.header, "th")]);
    var body = el("tbody", {}, tk.rows.map(function (r) { return row(r, "td"); }));
    return el("div", { class: "table" }, [el("table", {}, [head, body])]);
  }

  function blocks(tokens) {
    var out = [];
    (tokens || []).forEach(function (tk) {
      switch (tk.type) {
        case "space": case "def": break;
        case "paragraph": out.push(el("p", {}, inline(tk.tokens))); break;
        case "heading": out.push(el("h" + Math.min(6, tk.depth + 2), { class: "md-h" }, inline(tk.tokens))); break;
        case "code": out.push(codeBlock(tk)); break;
        case "blockquote": out.push(el("blockquote", {}, blocks(tk.tokens))); break;
        case "hr": out.push(el("hr")); break;
        case "table": out.push(table(tk)); break;
        case "list":
          out.push(el(tk.ordered ? "ol" : "ul", { start: tk.ordered && tk.start !== 1 ? String(tk.start) : null },
            tk.items.map(function (item) { return el("li", {}, blocks(item.tokens)); })));
          break;
        case "text": out.push.apply(out, tk.tokens ? inline(tk.tokens) : [document.createTextNode(tk.text)]); break;
        // raw HTML is shown as the text it is
        default: out.push(el("p", { text: tk.raw || tk.text || "" }));
      }
    });
    return out;
  }

  function markdown(text) {
    try {
      return blocks(marked.lexer(text, { gfm: true }));
    } catch (e) {
      return [el("p", { text: text })];
    }
  }

  // The embedded generator ends a reply with "(From: section; section)"; the chips show the
  // same sources, so a last paragraph naming only them is not repeated.
  function withoutSourceLine(text, sources) {
    var m = /\n*\(From: ([^\n]*)\)\s*$/.exec(text);
    if (!m || !sources || !sources.length) {
      return text;
    }
    var names = sources.map(function (s) { return s.name; });
    // a PDF's source is named with its page ("name, p. 4")
    var named = m[1].split("; ").every(function (n) { return names.indexOf(n.replace(/, p\. \d+$/, "")) >= 0; });
    return named ? text.slice(0, m.index) : text;
  }

  // ---- Layout ---------------------------------------------------------------------------------

  var host = el("div", { "data-replicad": "host" });
  var shadow = host.attachShadow({ mode: "open" });
  var sheet = new CSSStyleSheet();
  sheet.replaceSync(STYLE);
  shadow.adoptedStyleSheets = [sheet];

  var uid = "rc-" + Math.random().toString(36).slice(2, 8);
  var root = el("div", { class: "rc " + (pageMode ? "page" : "floating") + (cfg.position === "left" ? " left" : ""), "data-replicad": "widget", lang: lang });
  setAccent(root, cfg.color);

  var title = cfg.title || name;
  var panel = el("section", { id: uid + "-panel", class: "panel", role: pageMode ? "region" : "dialog", "aria-label": t("chatWith") });
  var head = el("header", { class: "head" }, [avatar()]);
  var heading = el(pageMode ? "h1" : "h2", { class: "title", text: title });
  var headText = el("div", { class: "head-text" }, [heading]);
  if (cfg.description) {
    headText.appendChild(el("p", { class: "desc", text: cfg.description }));
  }
  head.appendChild(headText);
  var log = el("div", { class: "log", role: "log", "aria-live": "polite", "aria-label": t("log"), tabindex: "0" });
  var chips = el("div", { class: "chips", role: "group", "aria-label": t("suggested") });
  var status = el("p", { class: "status", role: "status", "data-replicad": "status" });
  var form = el("form", { class: "form" });
  var label = el("label", { for: uid + "-input", class: "sr", text: t("message") });
  var input = el("textarea", { id: uid + "-input", rows: "1", autocomplete: "off", maxlength: "10000", placeholder: cfg.placeholder || t("placeholder") });
  var send = el("button", { type: "submit", class: "send", text: t("send") });
  var stop = el("button", { type: "button", class: "stop", "data-replicad": "stop", text: t("stop") });
  stop.hidden = true;
  form.appendChild(label);
  form.appendChild(input);
  form.appendChild(send);
  form.appendChild(stop);
  var column = el("div", { class: "column" }, [log, chips, status, form]);
  panel.appendChild(head);
  panel.appendChild(column);

  function avatar() {
    var box = el("div", { class: "avatar", "aria-hidden": "true" });
    var src = cfg.image && safeUrl(cfg.image);
    if (src && /^https?:/.test(src)) {
      var img = el("img", { src: src, alt: "" });
      img.addEventListener("error", function () { img.replaceWith(document.createTextNode(initials())); });
      box.appendChild(img);
    } else {
      box.textContent = initials();
    }
    return box;
  }

  function initials() {
    return name.split(/\s+/).filter(Boolean).slice(0, 2).map(function (w) { return w.charAt(0).toUpperCase(); }).join("") || "?";
  }

  // The accent colour a site chose (any CSS colour), with a text colour that stays readable on it.
  function setAccent(node, color) {
    if (!color || !window.CSS || !CSS.supports("color", color)) {
      return;
    }
    var probe = el("span");
    probe.style.color = color;
    (document.body || document.documentElement).appendChild(probe);
    var rgb = (getComputedStyle(probe).color.match(/\d+(\.\d+)?/g) || [0, 0, 0]).map(Number);
    probe.remove();
    var lum = [0, 1, 2].map(function (i) {
      var c = rgb[i] / 255;
      return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4);
    });
    var l = 0.2126 * lum[0] + 0.7152 * lum[1] + 0.0722 * lum[2];
    node.style.setProperty("--accent", color);
    node.style.setProperty("--on-accent", l > 0.18 ? "#111" : "#fff");
  }

  var launcher = null;
  if (pageMode) {
    var target = (cfg.target && document.getElementById(cfg.target)) || document.body;
    root.appendChild(panel);
    target.appendChild(host);
  } else {
    launcher = el("button", { type: "button", class: "launcher", "aria-expanded": "false", "aria-controls": panel.id, "aria-label": t("open"), text: cfg.launcherLabel || t("launcher") });
    var close = el("button", { type: "button", class: "close", "aria-label": t("close"), text: "\u00d7" });
    head.appendChild(close);
    panel.hidden = true;
    root.appendChild(panel);
    root.appendChild(launcher);
    document.body.appendChild(host);
    launcher.addEventListener("click", function () { setOpen(panel.hidden); });
    close.addEventListener("click", function () { setOpen(false); });
    panel.addEventListener("keydown", function (e) {
      if (e.key === "Escape") {
        setOpen(false);
      }
    });
  }
  shadow.appendChild(root);

  var loaded = false;
  function setOpen(open) {
    if (pageMode) {
      return;
    }
    panel.hidden = !open;
    launcher.setAttribute("aria-expanded", String(open));
    launcher.setAttribute("aria-label", open ? t("close") : t("open"));
    if (open) {
      input.focus();
      if (!loaded) {
        loaded = true;
        loadHistory();
      }
    } else {
      launcher.focus();
    }
  }

  // ---- Messages -------------------------------------------------------------------------------

  // Appends a message to the log, or to `into` (a fragment of earlier messages) when given.
  function addMessage(role, text, into) {
    var box = el("div", { class: "msg " + role, "data-replicad": "message", "data-role": role });
    box.appendChild(el("span", { class: "sr", text: (role === "user" ? t("you") : name) + ": " }));
    var body = el("div", { class: "text", "data-replicad": "text" });
    box.appendChild(body);
    var msg = { box: box, body: body, role: role };
    setText(msg, text || "");
    (into || log).appendChild(box);
    if (role === "user") {
      chips.hidden = true;
    }
    scroll();
    return msg;
  }

  // Shows `text` in `msg` now; a streamed render still waiting for its frame is dropped.
  function setText(msg, text) {
    if (msg.frame) {
      cancelAnimationFrame(msg.frame);
      msg.frame = 0;
    }
    msg.text = text;
    msg.body.replaceChildren.apply(msg.body, msg.role === "user" ? [document.createTextNode(text)] : markdown(text));
  }

  function scroll() {
    log.scrollTop = log.scrollHeight;
  }

  // Numbered chips under an answer; a chip opens the passage it stands for.
  function showSources(msg, sources) {
    if (!sources || !sources.length) {
      return;
    }
    var list = el("ol", { class: "sources", "aria-label": t("sources"), "data-replicad": "sources" });
    var passage = el("div", { class: "passage", "data-replicad": "passage", role: "region" });
    passage.hidden = true;
    sources.forEach(function (s, i) {
      var chip = el("button", { type: "button", class: "chip", "aria-expanded": "false", "aria-label": t("source", { n: i + 1, name: s.name }) }, [
        el("span", { class: "n", "aria-hidden": "true", text: String(i + 1) }),
        el("span", { "data-replicad": "source-name", text: s.name }),
      ].concat(s.page ? [el("span", { class: "chip-page", "data-replicad": "source-page", text: t("page", { n: s.page }) })] : []));
      chip.addEventListener("click", function () { togglePassage(list, passage, chip, s, i); });
      list.appendChild(el("li", {}, [chip]));
    });
    msg.box.appendChild(list);
    msg.box.appendChild(passage);
  }

  function togglePassage(list, passage, chip, source, i) {
    var opening = chip.getAttribute("aria-expanded") !== "true";
    Array.prototype.forEach.call(list.querySelectorAll(".chip"), function (c) { c.setAttribute("aria-expanded", "false"); });
    passage.hidden = !opening;
    if (opening) {
      chip.setAttribute("aria-expanded", "true");
      passage.setAttribute("aria-label", t("source", { n: i + 1, name: source.name }));
      var shut = el("button", { type: "button", class: "close", "aria-label": t("closePassage"), text: "\u00d7" });
      shut.addEventListener("click", function () { togglePassage(list, passage, chip, source, i); chip.focus(); });
      passage.replaceChildren(
        el("div", { class: "passage-head" }, [el("strong", { "data-replicad": "passage-name", text: source.name }), shut]),
        el("div", { class: "passage-text", "data-replicad": "passage-text", text: source.content || "" })
      );
      // a web page's source opens the page scrolled to the quoted words (its text fragment)
      var href = source.url && safeUrl(source.url);
      if (href) {
        passage.appendChild(el("a", { class: "open-page", "data-replicad": "source-link", href: href, target: "_blank", rel: "noopener noreferrer", text: t("openPage") }));
      }
      passage.scrollIntoView({ block: "nearest" });
    }
  }

  function fail(text) {
    status.textContent = text;
  }

  // The API's error text (spec error body `{success: false, error}`), else a general one.
  function errorOf(res) {
    return res.json().then(function (b) { return (b && b.error) || t("unavailable"); }, function () { return t("unavailable"); });
  }

  // ---- History --------------------------------------------------------------------------------

  // Earlier messages, loaded once when the chat first opens; a question asked meanwhile is sent
  // once they are in (so they never include it) and shown below them.
  var history = Promise.resolve();
  function loadHistory() {
    history = fetch(api + "/v1/embed/" + replica + "/history", { headers: headers({ accept: "application/json" }) })
      .then(function (res) {
        if (!res.ok) {
          return errorOf(res).then(function (text) { throw { api: text }; });
        }
        return res.json();
      })
      .then(function (body) {
        var earlier = document.createDocumentFragment();
        if (!body.items.length && cfg.greeting) {
          addMessage("assistant", cfg.greeting, earlier);
        }
        body.items.forEach(function (item) {
          var m = addMessage(item.role, withoutSourceLine(item.content, item.sources), earlier);
          showSources(m, item.sources);
          if (item.interrupted) {
            markStopped(m);
          }
        });
        log.insertBefore(earlier, log.firstChild);
        scroll();
      })
      .catch(function (e) {
        // a refused origin or no network: the browser does not let the page read why
        fail(e && e.api ? e.api : t("unavailable"));
      });
  }

  // ---- Asking ---------------------------------------------------------------------------------

  var asking = null;

  function parseEvent(raw) {
    var event = "message";
    var data = "";
    raw.split(/\r?\n/).forEach(function (line) {
      if (line.indexOf("event:") === 0) {
        event = line.slice(6).trim();
      } else if (line.indexOf("data:") === 0) {
        data += line.slice(5).replace(/^ /, "");
      }
    });
    return !data || data === "[DONE]" ? null : { event: event, value: JSON.parse(data) };
  }

  function handleEvent(ev, msg, state) {
    if (ev.event === "delta") {
      state.text += ev.value.delta;
      typing(msg, false);
      render(msg, state.text);
    } else if (ev.event === "message") {
      typing(msg, false);
      setText(msg, withoutSourceLine(ev.value.content, ev.value.sources));
      showSources(msg, ev.value.sources);
      state.done = true;
    } else if (ev.event === "error") {
      state.error = ev.value.error || t("failed");
    }
    scroll();
  }

  // Re-renders a streamed answer at most once a frame.
  function render(msg, text) {
    msg.pending = text;
    if (!msg.frame) {
      msg.frame = requestAnimationFrame(function () {
        msg.frame = 0;
        setText(msg, msg.pending);
        scroll();
      });
    }
  }

  function typing(msg, on) {
    if (on) {
      msg.body.replaceChildren(el("span", { class: "typing", "data-replicad": "typing", role: "img", "aria-label": t("typing") }, [el("i"), el("i"), el("i")]));
    } else if (msg.body.querySelector(".typing")) {
      msg.body.replaceChildren();
    }
  }

  function markStopped(msg) {
    msg.box.setAttribute("data-interrupted", "true");
    msg.box.appendChild(el("p", { class: "note", text: t("stopped") }));
  }

  function busy(on) {
    send.hidden = on;
    send.disabled = on;
    stop.hidden = !on;
  }

  // Reads the event stream of `res` into `msg`.
  function pump(res, msg, state) {
    var reader = res.body.getReader();
    var decoder = new TextDecoder();
    var buffer = "";
    function next() {
      return reader.read().then(function (chunk) {
        if (chunk.done) {
          return;
        }
        buffer += decoder.decode(chunk.value, { stream: true });
        var parts = buffer.split(/\r?\n\r?\n/);
        buffer = parts.pop();
        parts.map(parseEvent).forEach(function (ev) {
          if (ev) {
            handleEvent(ev, msg, state);
          }
        });
        return next();
      });
    }
    return next();
  }

  function ask(question, userMsg) {
    if (asking) {
      return;
    }
    status.textContent = "";
    userMsg = userMsg || addMessage("user", question);
    var msg = addMessage("assistant", "");
    typing(msg, true);
    msg.box.setAttribute("aria-busy", "true");
    busy(true);
    var controller = window.AbortController ? new AbortController() : null;
    var state = { text: "", done: false, error: null };
    asking = { controller: controller, msg: msg, state: state };
    history
      .then(function () {
        return fetch(api + "/v1/embed/" + replica + "/chat", {
          method: "POST",
          headers: headers({ "content-type": "application/json", accept: "text/event-stream" }),
          body: JSON.stringify({ content: question }),
          signal: controller ? controller.signal : undefined,
        });
      })
      .then(function (res) {
        if (!res.ok || !res.body) {
          return errorOf(res).then(function (text) { state.error = text; });
        }
        return pump(res, msg, state);
      })
      .catch(function (e) {
        // a stream cut after its error event keeps that event's text
        if (!(e && e.name === "AbortError")) {
          state.error = state.error || t("unavailable");
        }
      })
      .then(function () {
        finish(question, userMsg, msg, state, controller && controller.signal.aborted);
      });
  }

  function finish(question, userMsg, msg, state, stopped) {
    asking = null;
    msg.box.removeAttribute("aria-busy");
    typing(msg, false);
    busy(false);
    if (stopped) {
      setText(msg, state.text);
      markStopped(msg);
    } else if (state.error || !state.done) {
      fail(state.error || t("failed"));
      if (!state.text) {
        msg.box.remove();
      }
      offerRetry(question, userMsg);
    }
    input.focus();
  }

  function offerRetry(question, userMsg) {
    var retry = el("button", { type: "button", class: "retry", "data-replicad": "retry", text: t("retry") });
    retry.addEventListener("click", function () {
      retry.remove();
      ask(question, userMsg);
    });
    userMsg.box.appendChild(retry);
  }

  stop.addEventListener("click", function () {
    if (asking && asking.controller) {
      asking.controller.abort();
    }
  });

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    submit();
  });
  input.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      submit();
    }
  });
  // The input grows with its text, up to the stylesheet's max-height.
  function fit() {
    input.style.height = "auto";
    input.style.height = input.scrollHeight + 2 + "px";
  }
  input.addEventListener("input", fit);
  function submit() {
    var q = input.value.trim();
    if (q && !asking) {
      input.value = "";
      fit();
      ask(q);
    }
  }

  function suggestedQuestions() {
    var list = [];
    try {
      list = JSON.parse(cfg.questions || "[]");
    } catch (e) {
      list = [];
    }
    list.filter(function (q) { return typeof q === "string" && q; }).forEach(function (q) {
      var b = el("button", { type: "button", class: "chip", text: q });
      b.addEventListener("click", function () { ask(q); });
      chips.appendChild(b);
    });
    chips.hidden = !chips.children.length;
  }

  // ---- The JavaScript API ---------------------------------------------------------------------

  window.replicad = {
    open: function () { setOpen(true); },
    close: function () { setOpen(false); },
    ask: function (text) {
      setOpen(true);
      if (typeof text === "string" && text.trim()) {
        ask(text.trim());
      }
    },
    // A token the site's backend signed for its logged-in user: the conversation becomes that
    // user's, on every device.
    identify: function (token) {
      identity = token || null;
      log.replaceChildren();
      if (loaded) {
        loadHistory();
      }
    },
  };

  suggestedQuestions();
  if (pageMode) {
    loaded = true;
    loadHistory();
  }
})();
