#!/usr/bin/env node
// Drives an mf_print --format html page in Debian's chromium (headless, fresh profile, no
// network) through playwright-core, for tests/viewer/test_mf_print_html.py and for the README's
// screenshot. Real input events: the mouse moves and clicks on the canvas, the keyboard
// types into the search box.
//
//   node tests/html/drive.js STEPS.json    (writes one JSON result per step to stdout)
//
// STEPS.json: {"html": "/abs/page.html", "width": 1200, "height": 800, "steps": [...]}, a step:
//   {"op": "load", "find": N, "summary": N, "names": true}
//                                              header text, state, drawn frames, timings;
//                                              the frames named N (drawn or not), their sums,
//                                              every name in the graph
//   {"op": "hover_frame", "name": N}           the tooltip's text over the drawn frame N
//   {"op": "click_frame", "name": N}           clicks frame N's middle; state and frames after
//   {"op": "key", "key": "Escape"}             presses a key; state and frames after
//   {"op": "search", "text": T}                types T into the search box; state and frames
//   {"op": "click", "selector": S}             clicks an element; state and frames after
//   {"op": "drag_timeline", "from": S, "to": S}
//                                              drags the mouse across the timeline's chart
//                                              from second S to second S; the timeline,
//                                              state and frames after
//   {"op": "screenshot", "path": P, "full_page": true}
//                                              saves a PNG; the canvas's place in it, frames
// A frame name must be drawn once (the first drawn frame of that name is used otherwise,
// and "ambiguous" says how many there were).
"use strict";
const fs = require("fs");
const path = require("path");
const { chromium } = require(path.join(__dirname, "node_modules", "playwright-core"));

async function main() {
  const spec = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
  const browser = await chromium.launch({
    executablePath: process.env.MF_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
  const results = [];
  const errors = [];
  const requests = [];
  try {
    const context = await browser.newContext({
      viewport: { width: spec.width || 1200, height: spec.height || 800 },
      deviceScaleFactor: spec.scale || 1,
    });
    const page = await context.newPage();
    page.on("pageerror", (e) => errors.push("pageerror: " + e.message));
    page.on("console", (m) => { if (m.type() === "error") errors.push("console: " + m.text()); });
    page.on("request", (r) => requests.push(r.url()));
    const url = "file://" + path.resolve(spec.html);

    const frames = () => page.evaluate(() => window.mfFlame.frames());
    const st = () => page.evaluate(() => window.mfFlame.state());
    async function frameNamed(name) {
      const all = (await frames()).filter((f) => f.name === name);
      if (!all.length) throw new Error(`no drawn frame named ${name}`);
      return [all[0], all.length];
    }
    async function canvasBox() {
      return page.evaluate(() => {
        const r = document.getElementById("mf-canvas").getBoundingClientRect();
        return { x: r.left + window.scrollX, y: r.top + window.scrollY };
      });
    }
    async function mouseTo(f, click) {
      // Scroll the frame into view, then act at its middle in viewport coordinates.
      await page.evaluate((y) => {
        const r = document.getElementById("mf-canvas").getBoundingClientRect();
        const top = r.top + window.scrollY + y;
        if (top < window.scrollY + 40 || top > window.scrollY + window.innerHeight - 40)
          window.scrollTo(0, Math.max(0, top - window.innerHeight / 2));
      }, f.y);
      const r = await page.evaluate(() => {
        const b = document.getElementById("mf-canvas").getBoundingClientRect();
        return { x: b.left, y: b.top };
      });
      const x = r.x + f.x + f.w / 2, y = r.y + f.y + f.h / 2;
      await page.mouse.move(x, y);
      if (click) await page.mouse.click(x, y);
    }

    for (const step of spec.steps) {
      const out = { op: step.op };
      if (step.op === "load") {
        const t0 = Date.now();
        await page.goto(url, { waitUntil: "load" });
        try {
          await page.waitForFunction(() => window.mfFlame && window.mfFlame.ready, null, { timeout: 15000 });
        } catch (e) {
          throw new Error("the page never drew its graph (window.mfFlame.ready); page errors: " +
                          JSON.stringify(errors) + "; " + e.message);
        }
        out.wall_ms = Date.now() - t0;
        out.timing = await page.evaluate(() => window.mfFlame.timing);
        out.first_contentful_paint = await page.evaluate(() => {
          const e = performance.getEntriesByName("first-contentful-paint")[0];
          return e ? e.startTime : null;
        });
        out.header = await page.evaluate(() => document.getElementById("mf-header").innerText);
        out.title = await page.title();
        out.nodes = await page.evaluate(() => window.mfFlame.nodes);
        out.timeline = await page.evaluate(() => window.mfFlame.timeline ? window.mfFlame.timeline() : null);
        if (step.find) out.found = await page.evaluate((n) => window.mfFlame.find(n).map(window.mfFlame.node), step.find);
        if (step.summary) out.summary = await page.evaluate((n) => window.mfFlame.summary(n), step.summary);
        if (step.names) out.names = await page.evaluate(() => window.mfFlame.names());
        out.dom = await page.evaluate(() => ({
          scripts: document.scripts.length, elements: document.getElementsByTagName("*").length,
          pwned: window.mfPwned === undefined ? null : window.mfPwned }));
        out.html_bytes = fs.statSync(spec.html).size;
      } else if (step.op === "hover_frame") {
        const [f, k] = await frameNamed(step.name);
        await mouseTo(f, false);
        out.ambiguous = k;
        out.tip = await page.evaluate(() => {
          const t = document.getElementById("mf-tip");
          return t.hidden ? null : Array.from(t.children).map((c) => c.textContent);
        });
      } else if (step.op === "click_frame") {
        const [f, k] = await frameNamed(step.name);
        out.ambiguous = k;
        await mouseTo(f, true);
      } else if (step.op === "key") {
        await page.keyboard.press(step.key);
      } else if (step.op === "search") {
        await page.click("#mf-search", { clickCount: 3 });
        await page.keyboard.type(step.text);
        await page.waitForFunction((t) => window.mfFlame.state().search === t, step.text);
      } else if (step.op === "click") {
        await page.click(step.selector);
      } else if (step.op === "drag_timeline") {
        const at = await page.evaluate((s) => {
          const c = document.getElementById("mf-tl-canvas");
          c.scrollIntoView();
          const r = c.getBoundingClientRect();
          return { x0: r.left + window.mfFlame.timelineX(s[0]), x1: r.left + window.mfFlame.timelineX(s[1]),
                   y: r.top + r.height / 2 };
        }, [step.from, step.to]);
        await page.mouse.move(at.x0, at.y);
        await page.mouse.down();
        await page.mouse.move(at.x1, at.y, { steps: 5 });
        await page.mouse.up();
        out.timeline = await page.evaluate(() => window.mfFlame.timeline());
      } else if (step.op === "screenshot") {
        await page.mouse.move(0, 0);
        if (step.hover) {
          const [f] = await frameNamed(step.hover);
          await mouseTo(f, false);
        }
        if (step.scroll_top) await page.evaluate(() => window.scrollTo(0, 0));
        await page.screenshot({ path: step.path, fullPage: step.full_page !== false });
        out.path = step.path;
        out.canvas = await canvasBox();
        out.scale = spec.scale || 1;
      } else {
        throw new Error("unknown op " + step.op);
      }
      if (step.op !== "hover_frame") {
        out.state = await st();
        if (step.frames !== false) out.frames = await frames();
      }
      results.push(out);
    }
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify({ results, errors, requests }) + "\n");
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack || e) + "\n");
  process.exit(1);
});
