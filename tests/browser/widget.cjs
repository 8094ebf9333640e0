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
  await answer.locator('[data-replicad="sources"] li').first().waitFor({ timeout: WAIT });
  return {
    text: await answer.locator('[data-replicad="text"]').innerText(),
    sources: await answer.locator('[data-replicad="sources"] li').allInnerTexts(),
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
  out.focused_input = await input.evaluate((e) => e === document.activeElement);
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
  await status.filter({ hasText: "busy" }).waitFor({ timeout: WAIT });
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
  await page.getByRole("button", { name: config.suggested }).click();
  out.page_answer = await lastAnswer(page, config.expect);
  await page.reload();
  await page.locator('[data-replicad="message"][data-role="user"]').first().waitFor({ timeout: WAIT });
  out.page_after_reload = await messages(page);
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
  const out = { violations, chat_answers };
  const steps = { widget, refused, busy, web_page: webPage, docs_page: docsPage };
  let step = "";
  try {
    for (step of config.steps) {
      await steps[step](page, out);
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
