// Opens a report.html in headless Chromium (Debian's, driven by the pinned playwright-core) as a reader's first
// screen and prints what a reader gets, as JSON: every image decoded or not, the console's errors, the answer's pick
// and whether it shows without scrolling; --screenshot FILE keeps that first screen as a PNG.
//   node scripts/report-page.mjs lab-out/report.html [--screenshot docs/images/report.png] [--width 1280 --height 800]
// tests/test_report_page.py asserts on its output; `make docs` keeps the screenshot for the README.
import { chromium } from "playwright-core";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 ? args.splice(at, 2)[1] : fallback;
};
const screenshot = option("--screenshot");
const width = Number(option("--width", "1280"));
const height = Number(option("--height", "800"));
const page_path = args[0];
if (!page_path || !existsSync(page_path)) {
  console.error("usage: node scripts/report-page.mjs REPORT.html [--screenshot FILE.png] [--width W --height H]");
  process.exit(2);
}
const executablePath = process.env.DSLAB_CHROMIUM || "/usr/bin/chromium";
if (!existsSync(executablePath)) {
  console.error(`report-page: no Chromium at ${executablePath}: install Debian's chromium (make setup does, as root)`);
  process.exit(2);
}

const started = Date.now();
// The flags this machine needs: no sandbox as root, no GPU, and nothing that reaches for the network (it is closed:
// background connections would be refused, many at a time). playwright-core gives it a fresh profile of its own.
// Chromium writes its settings under HOME (dconf, ~/.config/chromium): a home of its own, removed at the end, so that
// the suite leaves the machine's home as it found it.
const home = mkdtempSync(join(tmpdir(), "dslab-chromium-"));
const browser = await chromium.launch({
  executablePath,
  args: ["--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
  env: { ...process.env, HOME: home, XDG_CONFIG_HOME: join(home, "config"), XDG_CACHE_HOME: join(home, "cache"),
         XDG_RUNTIME_DIR: join(home, "runtime") },
});
process.on("exit", () => rmSync(home, { recursive: true, force: true }));
try {
  const page = await browser.newPage({ viewport: { width, height }, deviceScaleFactor: 1 });
  const console_errors = [];
  page.on("console", (message) => {
    if (message.type() === "error") console_errors.push(message.text());
  });
  page.on("pageerror", (error) => console_errors.push(`page error: ${error.message}`));
  page.on("requestfailed", (request) => console_errors.push(`request failed: ${request.url().slice(0, 80)}`));
  await page.goto(pathToFileURL(resolve(page_path)).href, { waitUntil: "load" });
  const seen = await page.evaluate(async () => {
    const view = { width: document.documentElement.clientWidth, height: window.innerHeight };
    const images = [];
    for (const image of document.images) {
      let decoded = true;
      try { await image.decode(); } catch { decoded = false; }
      const box = image.getBoundingClientRect();
      images.push({ alt: image.alt, decoded, natural_width: image.naturalWidth, natural_height: image.naturalHeight,
                    shown_width: Math.round(box.width), fits: box.left >= 0 && box.right <= view.width + 0.5 });
    }
    const pick = [...document.querySelectorAll("strong")].find((node) => node.textContent.startsWith("Pick:"));
    const box = pick ? pick.getBoundingClientRect() : null;
    const tables = [...document.querySelectorAll("table")].map((table) => {
      const shown = table.getBoundingClientRect();
      return { right: Math.round(shown.right), font_px: parseFloat(getComputedStyle(table.querySelector("td, th")).fontSize) };
    });
    return {
      view, images, tables,
      title: document.title,
      first_heading: document.querySelector("h2")?.textContent ?? null,
      pick: pick ? { text: pick.textContent, top: Math.round(box.top), bottom: Math.round(box.bottom),
                     in_first_screen: box.top >= 0 && box.bottom <= view.height } : null,
      page_width: document.documentElement.scrollWidth,
      body_font_px: parseFloat(getComputedStyle(document.body).fontSize),
    };
  });
  if (screenshot) await page.screenshot({ path: screenshot, fullPage: false });
  console.log(JSON.stringify({ ...seen, console_errors, seconds: (Date.now() - started) / 1000 }, null, 2));
} finally {
  await browser.close();
}
