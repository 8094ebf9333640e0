/* replicad chat widget. Include on a page:
 *   <script src="https://YOUR-REPLICAD/embed/widget.js" data-replica="REPLICA-UUID"
 *           data-key="rpl_embed_..." data-name="Docs helper" defer></script>
 * Options (data-*): replica (required), key (the public embed key), name, greeting,
 * api (the server's base URL; default: where this script comes from), mode ("page": inline in
 * the element whose id is data-target instead of a floating button).
 * No inline script, no eval, styles only through the CSSOM: it runs under a strict
 * Content-Security-Policy (script-src and connect-src naming the replicad server). */
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
  var uid = "replicad-" + Math.random().toString(36).slice(2, 8);

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
    for (var k in extra) {
      h[k] = extra[k];
    }
    return h;
  }

  function el(tag, attrs, style) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) {
      if (k === "text") {
        e.textContent = attrs[k];
      } else {
        e.setAttribute(k, attrs[k]);
      }
    }
    for (var s in style || {}) {
      e.style[s] = style[s];
    }
    return e;
  }

  var font = "system-ui, -apple-system, Segoe UI, Roboto, sans-serif";
  var root = el("div", { "data-replicad": "widget" }, { fontFamily: font, fontSize: "15px", color: "#1a1a1a" });
  var panel = el("div", { id: uid + "-panel", role: pageMode ? "region" : "dialog", "aria-label": "Chat with " + name }, {
    background: "#fff", border: "1px solid #ccc", borderRadius: "10px", display: "flex", flexDirection: "column",
    width: pageMode ? "100%" : "360px", maxWidth: "100%", height: pageMode ? "480px" : "520px", maxHeight: "80vh",
    boxShadow: pageMode ? "none" : "0 6px 24px rgba(0,0,0,.2)",
  });
  var head = el("div", {}, { display: "flex", alignItems: "center", padding: "10px 12px", borderBottom: "1px solid #eee" });
  head.appendChild(el("h2", { text: name }, { fontSize: "16px", margin: "0", flex: "1" }));
  var log = el("div", { role: "log", "aria-live": "polite", "aria-label": "Conversation", tabindex: "0" }, {
    flex: "1", overflowY: "auto", padding: "12px",
  });
  var form = el("form", {}, { display: "flex", gap: "6px", padding: "10px", borderTop: "1px solid #eee", flexWrap: "wrap" });
  var label = el("label", { for: uid + "-input", text: "Your message" }, { width: "100%", fontSize: "13px", color: "#444" });
  var input = el("input", { id: uid + "-input", type: "text", autocomplete: "off", maxlength: "10000" }, {
    flex: "1", padding: "8px", border: "1px solid #888", borderRadius: "6px", font: "inherit",
  });
  var send = el("button", { type: "submit", text: "Send" }, {
    padding: "8px 14px", border: "0", borderRadius: "6px", background: "#1f4fd1", color: "#fff", font: "inherit",
  });
  var status = el("p", { role: "status", "data-replicad": "status" }, { margin: "0 10px 8px", color: "#a40000", fontSize: "13px" });
  form.appendChild(label);
  form.appendChild(input);
  form.appendChild(send);
  panel.appendChild(head);
  panel.appendChild(log);
  panel.appendChild(status);
  panel.appendChild(form);

  var launcher = null;
  if (pageMode) {
    var target = (cfg.target && document.getElementById(cfg.target)) || document.body;
    root.appendChild(panel);
    target.appendChild(root);
  } else {
    root.style.position = "fixed";
    root.style.right = "20px";
    root.style.bottom = "20px";
    root.style.zIndex = "2147483000";
    launcher = el("button", { type: "button", "aria-expanded": "false", "aria-controls": panel.id, "aria-label": "Open chat with " + name, text: "Chat" }, {
      padding: "12px 18px", borderRadius: "24px", border: "0", background: "#1f4fd1", color: "#fff", font: "inherit",
      boxShadow: "0 4px 12px rgba(0,0,0,.25)", cursor: "pointer",
    });
    var close = el("button", { type: "button", "aria-label": "Close chat", text: "\u00d7" }, {
      border: "0", background: "transparent", fontSize: "22px", cursor: "pointer", padding: "0 4px",
    });
    head.appendChild(close);
    panel.hidden = true;
    panel.style.display = "none";
    panel.style.marginBottom = "10px";
    root.appendChild(panel);
    root.appendChild(launcher);
    document.body.appendChild(root);
    launcher.addEventListener("click", function () { setOpen(panel.hidden); });
    close.addEventListener("click", function () { setOpen(false); });
    panel.addEventListener("keydown", function (e) {
      if (e.key === "Escape") {
        setOpen(false);
      }
    });
  }

  var loaded = false;
  function setOpen(open) {
    panel.hidden = !open;
    panel.style.display = open ? "flex" : "none";
    if (launcher) {
      launcher.setAttribute("aria-expanded", String(open));
      launcher.setAttribute("aria-label", (open ? "Close chat with " : "Open chat with ") + name);
    }
    if (open) {
      input.focus();
      if (!loaded) {
        loaded = true;
        loadHistory();
      }
    } else if (launcher) {
      launcher.focus();
    }
  }

  // Appends a message to the log, or to `into` (a fragment of earlier messages) when given.
  function addMessage(role, text, into) {
    var box = el("div", { "data-replicad": "message", "data-role": role }, {
      margin: "0 0 10px", padding: "8px 10px", borderRadius: "8px", whiteSpace: "pre-wrap",
      background: role === "user" ? "#e8eefc" : "#f3f3f3", alignSelf: role === "user" ? "flex-end" : "flex-start",
    });
    box.appendChild(el("span", { class: "replicad-sr", text: role === "user" ? "You: " : name + ": " }, {
      position: "absolute", width: "1px", height: "1px", overflow: "hidden", clip: "rect(0 0 0 0)",
    }));
    var body = el("span", { "data-replicad": "text", text: text || "" });
    box.appendChild(body);
    (into || log).appendChild(box);
    log.scrollTop = log.scrollHeight;
    return { box: box, body: body };
  }

  function showSources(msg, sources) {
    if (!sources || !sources.length) {
      return;
    }
    var seen = {};
    var list = el("ul", { "aria-label": "Sources", "data-replicad": "sources" }, { margin: "6px 0 0", paddingLeft: "18px", fontSize: "13px", color: "#444" });
    sources.forEach(function (s) {
      if (!seen[s.name]) {
        seen[s.name] = true;
        list.appendChild(el("li", { text: s.name }));
      }
    });
    msg.box.appendChild(list);
  }

  function fail(text) {
    status.textContent = text;
  }

  // Earlier messages, loaded once when the chat first opens; a question asked meanwhile is sent
  // once they are in (so they never include it) and shown below them.
  var history = Promise.resolve();
  function loadHistory() {
    history = fetch(api + "/v1/embed/" + replica + "/history", { headers: headers({ accept: "application/json" }) })
      .then(function (res) {
        if (!res.ok) {
          throw new Error("HTTP " + res.status);
        }
        return res.json();
      })
      .then(function (body) {
        // Earlier messages go above anything asked while they were loading.
        var earlier = document.createDocumentFragment();
        if (!body.items.length && cfg.greeting) {
          addMessage("assistant", cfg.greeting, earlier);
        }
        body.items.forEach(function (item) {
          var m = addMessage(item.role, item.content, earlier);
          showSources(m, item.sources);
        });
        log.insertBefore(earlier, log.firstChild);
      })
      .catch(function () {
        fail("The chat is not available on this page.");
      });
  }

  function handleEvent(raw, msg, state) {
    var event = "message";
    var data = "";
    raw.split(/\r?\n/).forEach(function (line) {
      if (line.indexOf("event:") === 0) {
        event = line.slice(6).trim();
      } else if (line.indexOf("data:") === 0) {
        data += line.slice(5).replace(/^ /, "");
      }
    });
    if (!data || data === "[DONE]") {
      return;
    }
    var value = JSON.parse(data);
    if (event === "delta") {
      state.text += value.delta;
      msg.body.textContent = state.text;
    } else if (event === "message") {
      msg.body.textContent = value.content;
      showSources(msg, value.sources);
      state.done = true;
    } else if (event === "error") {
      fail(value.error || "The reply was cut short.");
    }
    log.scrollTop = log.scrollHeight;
  }

  function ask(question) {
    status.textContent = "";
    addMessage("user", question);
    var msg = addMessage("assistant", "");
    msg.box.setAttribute("aria-busy", "true");
    send.disabled = true;
    var state = { text: "", done: false };
    history
      .then(function () {
        return fetch(api + "/v1/embed/" + replica + "/chat", {
          method: "POST",
          headers: headers({ "content-type": "application/json", accept: "text/event-stream" }),
          body: JSON.stringify({ content: question }),
        });
      })
      .then(function (res) {
        if (!res.ok || !res.body) {
          var refused = new Error("HTTP " + res.status);
          refused.status = res.status;
          throw refused;
        }
        var reader = res.body.getReader();
        var decoder = new TextDecoder();
        var buffer = "";
        function pump() {
          return reader.read().then(function (chunk) {
            if (chunk.done) {
              return;
            }
            buffer += decoder.decode(chunk.value, { stream: true });
            var parts = buffer.split(/\r?\n\r?\n/);
            buffer = parts.pop();
            parts.forEach(function (p) { handleEvent(p, msg, state); });
            return pump();
          });
        }
        return pump();
      })
      .catch(function (e) {
        if (!state.text) {
          msg.box.remove();
        }
        // 429: this visitor, the replica or the site's monthly conversations are at their limit.
        fail(e && e.status === 429
          ? "The chat is busy right now; please try again later."
          : "The chat is not available on this page.");
      })
      .then(function () {
        msg.box.removeAttribute("aria-busy");
        send.disabled = false;
        input.focus();
      });
  }

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    var q = input.value.trim();
    if (q && !send.disabled) {
      input.value = "";
      ask(q);
    }
  });

  if (pageMode) {
    Array.prototype.forEach.call(document.querySelectorAll("[data-replicad-question]"), function (b) {
      b.addEventListener("click", function () {
        if (!send.disabled) {
          ask(b.getAttribute("data-replicad-question"));
        }
      });
    });
    loaded = true;
    loadHistory();
  }
})();
