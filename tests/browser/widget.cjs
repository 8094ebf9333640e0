// Drives Debian's headless Chromium through playwright-core for tests/it/embed.rs (the widget
// and the web chat page) and tests/it/openapi.rs (the docs page).
// Usage: node widget.cjs <config.json>; config: {chromium, modules, artifacts, scenario, ...}.
// Prints one JSON line of observations on success; on failure prints the error, saves a
// screenshot under `artifacts` and exits 1. Any Content-Security-Policy violation fails.
"use strict";
const fs = require("fs");
const path = require("path");

const config = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const { chromium } = require(path.join(config.modules, "playwright-core"));

const FLAGS = [
  "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
  "--disable-dev-shm-usage",
];
const WAIT = 20000;

async function openWidget(page) {
  const launcher = page.getByRole("button", { name: /^Open chat with / });
  await launcher.focus();
  await page.keyboard.press("Enter");
  const input = page.getByLabel("Your message");
  await input.waitFor({ state: "visible", timeout: WAIT });
  return input;
}

async function ask(page, input, question) {
  await input.fill(question);
  await page.keyboard.press("Enter");
}

async function lastAnswer(page, expect) {
  const answer = page.locator('[data-replicad="message"][data-role="assistant"]').last();
  await answer.locator('[data-replicad="text"]').filter({ hasText: expect }).waitFor({ timeout: WAIT });
  await answer.locator('[data-replicad="source-name"]').first().waitFor({ timeout: WAIT });
  return {
    text: await answer.locator('[data-replicad="text"]').innerText(),
    sources: await answer.locator('[data-replicad="source-name"]').allInnerTexts(),
  };
}

async function messages(page) {
  return page.locator('[data-replicad="message"] [data-replicad="text"]').allInnerTexts();
}

// Holds the history the widget loads on opening until `release` is called, so a question can be
// asked while it loads: the earlier messages (here only the greeting) must still come first.
async function holdHistory(page) {
  let release;
  const released = new Promise((resolve) => { release = resolve; });
  const pattern = /\/v1\/embed\/[^/]+\/history$/;
  await page.route(pattern, async (route) => {
    await released;
    await route.continue();
  });
  return release; // once released, later loads (the reload) pass at once

}

// The widget on an allowed site: ask, read the streamed answer and sources, reload, keep it.
async function widget(page, out) {
  const release = await holdHistory(page);
  await page.goto(config.allowed_url);
  out.hidden_before_opening = await page.getByRole("dialog").isHidden();
  let input = await openWidget(page);
  out.focused_input = await input.evaluate((e) => e.getRootNode().activeElement === e);
  await ask(page, input, config.question);
  await page.locator('[data-replicad="message"][data-role="user"]').first().waitFor({ timeout: WAIT });
  release();
  out.first = await lastAnswer(page, config.expect);
  out.first_order = await messages(page);
  await page.keyboard.press("Escape");
  out.closed_with_escape = await page.getByRole("dialog").isHidden();
  await page.reload();
  input = await openWidget(page);
  await page.locator('[data-replicad="message"][data-role="assistant"] [data-replicad="text"]')
    .filter({ hasText: config.expect }).first().waitFor({ timeout: WAIT });
  out.after_reload = await messages(page);
  out.visitor = await page.evaluate((k) => localStorage.getItem(k), "replicad-visitor-" + config.replica);
}

// The widget on a site whose origin is not allowed: refused, nothing answered.
async function refused(page, out) {
  await page.goto(config.refused_url);
  const input = await openWidget(page);
  await ask(page, input, config.question);
  const status = page.locator('[data-replicad="status"]');
  await status.filter({ hasText: "not available" }).waitFor({ timeout: WAIT });
  out.refused_status = await status.innerText();
  out.refused_answers = await page.locator('[data-replicad="message"][data-role="assistant"]').count();
}

// The widget of a visitor at its request limit: the 429 (readable through CORS) says the chat is
// busy, and the answer already given stays.
async function busy(page, out) {
  await page.goto(config.allowed_url);
  const input = await openWidget(page);
  await ask(page, input, config.question);
  await lastAnswer(page, config.expect);
  await page.locator('button[type="submit"]:not([disabled])').waitFor({ timeout: WAIT });
  await ask(page, input, config.question);
  const status = page.locator('[data-replicad="status"]');
  await status.filter({ hasText: "too many requests" }).waitFor({ timeout: WAIT });
  out.busy_status = await status.innerText();
  out.busy_messages = await messages(page);
}

// The web chat page: name, greeting, a suggested question answered, kept on reload.
async function webPage(page, out) {
  await page.goto(config.page_url);
  out.page_title = await page.title();
  out.page_heading = await page.getByRole("heading", { level: 1 }).innerText();
  await page.locator('[data-replicad="message"]').first().waitFor({ timeout: WAIT });
  out.page_greeting = (await messages(page))[0];
  out.page_description = await page.locator(".desc").innerText();
  out.page_avatar = await page.locator(".avatar").innerText();
  await page.getByRole("button", { name: config.suggested }).click();
  out.page_answer = await lastAnswer(page, config.expect);
  out.page_chips_after_asking = await page.locator(".chips").isVisible();
  await page.reload();
  await page.locator('[data-replicad="message"][data-role="user"]').first().waitFor({ timeout: WAIT });
  out.page_after_reload = await messages(page);
}

// The answer of the Markdown question (the fake model's reply): rendered as DOM, raw HTML shown
// as text, no image loaded; the code block copied with its button.
async function markdown(page, out) {
  await page.goto(config.allowed_url);
  const input = await openWidget(page);
  await ask(page, input, config.markdown_question);
  const answer = page.locator('[data-replicad="message"][data-role="assistant"]').last();
  await answer.locator("pre code").waitFor({ timeout: WAIT });
  await answer.locator('[data-replicad="source-name"]').first().waitFor({ timeout: WAIT });
  const text = answer.locator('[data-replicad="text"]');
  out.md = {
    code: await text.locator("pre code").innerText(),
    text: await text.innerText(),
    list_items: await text.locator("ol li").count(),
    inline_code: await text.locator("p code, li code").count(),
    table_cells: await text.locator("table td").allInnerTexts(),
    links: await text.locator("a").evaluateAll((as) => as.map((a) => ({
      href: a.getAttribute("href"), target: a.getAttribute("target"), rel: a.getAttribute("rel"), text: a.textContent,
    }))),
    images: await page.locator("img").count(),
    scripts_in_answer: await text.locator("script").count(),
    pwned: await page.evaluate(() => window.__pwned === 1),
  };
  await page.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin: new URL(config.allowed_url).origin });
  const copy = answer.locator('[data-replicad="copy"]');
  await copy.click();
  await copy.filter({ hasText: "Copied" }).waitFor({ timeout: WAIT });
  out.md.copied = await page.evaluate(() => navigator.clipboard.readText());
  // a citation chip opens the passage it stands for (with its page, and a web page's link)
  const chips = answer.locator(".sources .chip");
  const passage = answer.locator('[data-replicad="passage"]');
  const cite = async (chip) => {
    if (await chip.getAttribute("aria-expanded") !== "true") {
      await chip.click();
    }
    await passage.waitFor({ state: "visible", timeout: WAIT });
    const links = await passage.locator('[data-replicad="source-link"]').evaluateAll((as) => as.map((a) => ({
      href: a.getAttribute("href"), target: a.getAttribute("target"), rel: a.getAttribute("rel"), text: a.textContent,
    })));
    return {
      expanded: await chip.getAttribute("aria-expanded"),
      name: await passage.locator('[data-replicad="passage-name"]').innerText(),
      text: await passage.locator('[data-replicad="passage-text"]').innerText(),
      label: await chip.getAttribute("aria-label"),
      page: (await chip.locator('[data-replicad="source-page"]').allInnerTexts())[0] || null,
      link: links[0] || null,
    };
  };
  out.citation = await cite(chips.first());
  out.citations = [];
  for (let i = 0; i < await chips.count(); i++) {
    out.citations.push(await cite(chips.nth(i)));
  }
  fs.mkdirSync(config.artifacts, { recursive: true });
  await page.screenshot({ path: path.join(config.artifacts, "widget-markdown-answer.png") });
}

// A long answer stopped after its first words: the words stay, marked stopped.
async function stop(page, out) {
  const input = page.getByLabel("Your message");
  await ask(page, input, config.stop_question);
  const answer = page.locator('[data-replicad="message"][data-role="assistant"]').last();
  out.typing_shown = await answer.locator('[data-replicad="typing"]').count() > 0 || await answer.locator("p").count() > 0;
  await answer.locator("p").first().waitFor({ timeout: WAIT });
  await page.locator('[data-replicad="stop"]').click();
  await page.locator('[data-replicad="message"][data-interrupted="true"]').waitFor({ timeout: WAIT });
  out.stopped = {
    text: await answer.locator('[data-replicad="text"]').innerText(),
    note: await answer.locator(".note").innerText(),
    stop_hidden: await page.locator('[data-replicad="stop"]').isHidden(),
  };
  // the server keeps the stopped reply as interrupted: after a reload it is still marked
  // (the server stores it once it sees the reader gone, so look again a few times)
  out.stopped.after_reload = false;
  for (let i = 0; i < 20 && !out.stopped.after_reload; i++) {
    await page.reload();
    await openWidget(page);
    await page.locator('[data-replicad="message"][data-role="user"]').first().waitFor({ timeout: WAIT });
    out.stopped.after_reload = await page.locator('[data-replicad="message"][data-interrupted="true"]').count() > 0;
    if (!out.stopped.after_reload) {
      await page.waitForTimeout(250);
    }
  }
}

// An answer the model fails: the API's error text, then Retry asks again and is answered.
async function retry(page, out) {
  const input = page.getByLabel("Your message");
  const asked = await page.locator('[data-replicad="message"][data-role="user"]').count();
  await ask(page, input, config.retry_question);
  const status = page.locator('[data-replicad="status"]');
  await page.locator('[data-replicad="retry"]').waitFor({ timeout: WAIT });
  out.retry_status = await status.innerText();
  await page.locator('[data-replicad="retry"]').click();
  const answer = page.locator('[data-replicad="message"][data-role="assistant"]').last();
  await answer.locator('[data-replicad="text"]').filter({ hasText: config.recovered }).waitFor({ timeout: WAIT });
  out.retried = {
    questions_added: await page.locator('[data-replicad="message"][data-role="user"]').count() - asked,
    status: await status.innerText(),
  };
}

// A site that sets colour, position, language and labels with data- attributes, and drives the
// widget through its JavaScript API.
async function custom(page, out) {
  await page.goto(config.custom_url);
  const launcher = page.locator(".launcher");
  await launcher.waitFor({ timeout: WAIT });
  const box = await launcher.boundingBox();
  out.custom = {
    launcher: await launcher.innerText(),
    launcher_left: box.x < page.viewportSize().width / 2,
    launcher_background: await launcher.evaluate((e) => getComputedStyle(e).backgroundColor),
  };
  await page.evaluate(() => window.replicad.open());
  out.custom.title = await page.locator(".title").innerText();
  out.custom.placeholder = await page.locator("textarea").getAttribute("placeholder");
  out.custom.send = await page.locator(".send").innerText();
  out.custom.label = await page.locator("label").innerText();
  await page.evaluate((q) => window.replicad.ask(q), config.api_question);
  const answer = page.locator('[data-replicad="message"][data-role="assistant"]').last();
  await answer.locator('[data-replicad="text"]').filter({ hasText: config.recovered }).waitFor({ timeout: WAIT });
  out.custom.api_answer = await answer.locator('[data-replicad="text"]').innerText();
  await page.evaluate(() => window.replicad.close());
  out.custom.closed = await page.locator(".panel").isHidden();
}

// A logged-in visitor: the site's signed token makes the conversation the site user's, on a
// second device (another browser context, its own localStorage) too.
async function identity(page, out, browser) {
  await page.goto(config.allowed_url);
  await page.evaluate((token) => window.replicad.identify(token), config.identity);
  await page.evaluate((q) => window.replicad.ask(q), config.identity_question);
  const answer = page.locator('[data-replicad="message"][data-role="assistant"]').last();
  await answer.locator('[data-replicad="text"]').filter({ hasText: config.recovered }).waitFor({ timeout: WAIT });
  const other = await browser.newContext();
  const device = await other.newPage();
  await device.goto(config.allowed_url);
  await device.evaluate((token) => window.replicad.identify(token), config.identity);
  await device.evaluate(() => window.replicad.open());
  await device.locator('[data-replicad="message"][data-role="user"]').first().waitFor({ timeout: WAIT });
  out.other_device = await messages(device);
  out.devices = await Promise.all([page, device].map((p) => p.evaluate((k) => localStorage.getItem(k), "replicad-visitor-" + config.replica)));
  await other.close();
}

// The page of a replica with a profileImage (on its own host): the image is in the header.
async function profile(page, out) {
  await page.goto(config.profile_url);
  const img = page.locator(".avatar img");
  await img.waitFor({ timeout: WAIT });
  await page.waitForFunction(() => {
    const host = document.querySelector('[data-replicad="host"]');
    const i = host && host.shadowRoot.querySelector(".avatar img");
    return i && i.complete;
  }, null, { timeout: WAIT });
  out.profile_image_width = await img.evaluate((i) => i.naturalWidth);
}

// How many axe-core rules passed on nodes inside the widget's shadow root, per scan.
const axeRulesInShadow = [];

// axe-core's violations of impact serious or critical on the page as it is now.
async function axeScan(page) {
  await page.evaluate(fs.readFileSync(path.join(config.modules, "axe-core", "axe.min.js"), "utf8"));
  const result = await page.evaluate(() => window.axe.run(document));
  // the rules that found something to check inside the widget's shadow root: proof it was scanned
  axeRulesInShadow.push(result.passes.filter((r) => r.nodes.some((n) => Array.isArray(n.target[0]))).length);
  return result.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(" ")) }));
}

// The page and the open widget in light and dark, at a phone's and a desktop's width:
// screenshots kept, colours read, axe-core's scan.
async function looks(page, out) {
  fs.mkdirSync(config.artifacts, { recursive: true });
  out.looks = {};
  for (const scheme of ["light", "dark"]) {
    await page.emulateMedia({ colorScheme: scheme });
    for (const [width, height] of [[390, 844], [1280, 800]]) {
      await page.setViewportSize({ width, height });
      await page.goto(config.page_url);
      await page.locator('[data-replicad="message"][data-role="assistant"]').first().waitFor({ timeout: WAIT });
      await page.screenshot({ path: path.join(config.artifacts, `page-${scheme}-${width}.png`) });
      const panel = page.locator(".panel");
      const form = await page.locator(".form").boundingBox();
      out.looks[`page-${scheme}-${width}`] = {
        background: await panel.evaluate((e) => getComputedStyle(e).backgroundColor),
        form_at_bottom: Math.abs(form.y + form.height - height) <= 2,
        column_width: (await page.locator(".column").boundingBox()).width,
      };
      await page.goto(config.allowed_url);
      await openWidget(page);
      await page.screenshot({ path: path.join(config.artifacts, `widget-${scheme}-${width}.png`) });
      const open = await page.locator(".panel").boundingBox();
      out.looks[`widget-${scheme}-${width}`] = {
        background: await page.locator(".panel").evaluate((e) => getComputedStyle(e).backgroundColor),
        panel_width: open.width,
      };
    }
  }
  await page.emulateMedia({ colorScheme: "light" });
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.goto(config.page_url);
  await page.locator('[data-replicad="message"]').first().waitFor({ timeout: WAIT });
  out.axe_page = await axeScan(page);
  await page.goto(config.allowed_url);
  await openWidget(page);
  await page.locator('[data-replicad="message"]').first().waitFor({ timeout: WAIT });
  out.axe_widget = await axeScan(page);
  await page.emulateMedia({ colorScheme: "dark" });
  out.axe_widget_dark = await axeScan(page);
  await page.goto(config.page_url);
  await page.locator('[data-replicad="message"]').first().waitFor({ timeout: WAIT });
  out.axe_page_dark = await axeScan(page);
  out.axe_rules_in_shadow = axeRulesInShadow;
  await page.emulateMedia({ colorScheme: "light" });
  // the page's first paint: its first contentful paint as Chromium reports it, and (an upper
  // bound) the time from navigation until the replica's name is on screen
  await page.goto(config.page_url);
  await page.locator(".title").waitFor({ timeout: WAIT });
  out.header_shown_ms = await page.evaluate(() => performance.now());
  out.first_paint_ms = await page.evaluate(() => new Promise((resolve) => {
    new PerformanceObserver((list) => {
      const fcp = list.getEntries().find((e) => e.name === "first-contentful-paint");
      resolve(fcp ? fcp.startTime : null);
    }).observe({ type: "paint", buffered: true });
    setTimeout(() => resolve(null), 2000);
  }));
}

// The docs page (/docs): Swagger UI renders the document's operations under the page's policy.
async function docsPage(page, out) {
  await page.goto(config.docs_url);
  await page.locator(".opblock").first().waitFor({ timeout: WAIT });
  out.docs_operations = await page.locator(".opblock").count();
  // Open an operation with a body: its parameters, schemas and highlighted examples render too.
  await page.locator(".opblock-post .opblock-summary").first().click();
  await page.locator(".opblock-body .highlight-code, .opblock-body .microlight").first().waitFor({ timeout: WAIT });
  out.docs_opened = await page.locator(".opblock.is-open").count();
  out.docs_title = await page.locator(".info .title").first().innerText();
}

async function main() {
  const browser = await chromium.launch({ executablePath: config.chromium, args: FLAGS, headless: true });
  const context = await browser.newContext();
  const page = await context.newPage();
  const violations = [];
  page.on("console", (m) => {
    if (/Content Security Policy|Refused to (execute|load|apply|connect)/i.test(m.text())) {
      violations.push(m.text());
    }
  });
  const chat_answers = [];
  page.on("response", (r) => {
    if (/\/v1\/embed\/[^/]+\/chat$/.test(new URL(r.url()).pathname) && r.request().method() === "POST") {
      chat_answers.push({ status: r.status(), type: r.headers()["content-type"] || "" });
    }
  });
  const foreign = [];
  const own = [config.replicad, config.images, config.allowed_url, config.refused_url, config.page_url, config.custom_url, config.docs_url]
    .filter(Boolean).map((u) => new URL(u).origin);
  context.on("request", (r) => {
    const url = new URL(r.url());
    if (/^https?:$/.test(url.protocol) && !own.includes(url.origin)) {
      foreign.push(r.url());
    }
  });
  const out = { violations, chat_answers, foreign };
  const steps = { widget, refused, busy, web_page: webPage, docs_page: docsPage, markdown, stop, retry, custom, identity, profile, looks };
  let step = "";
  try {
    for (step of config.steps) {
      await steps[step](page, out, browser);
    }
  } catch (e) {
    fs.mkdirSync(config.artifacts, { recursive: true });
    const shot = path.join(config.artifacts, `embed-${step}-${Date.now()}.png`);
    await page.screenshot({ path: shot, fullPage: true }).catch(() => {});
    console.error(`step ${step} failed: ${e.stack || e}\nscreenshot: ${shot}\nobserved: ${JSON.stringify(out)}`);
    await browser.close();
    process.exit(1);
  }
  await browser.close();
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
