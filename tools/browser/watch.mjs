// Builds the page (src/page.js → dist/), serves it on loopback, and either waits for a person
// (--serve: prints the page's address) or opens it in headless Chromium and prints what the page
// recorded as one JSON line on stdout.
//
//   node watch.mjs --url http://127.0.0.1:4443/anon --name live [--seconds 20] [--stdin]
//                  [--screenshot out.png] [--latency MS] [--serve]
//
// Headless, a line `ready` on stdout says the page is connected to the relay; the page then
// plays for --seconds, or with --stdin until standard input closes (--seconds bounding it).
//
// Chromium is Debian's (/usr/bin/chromium, or $CHROMIUM), started by playwright-core, which
// never downloads a browser of its own. Exit status: 0 done, 1 failure, 3 Chromium cannot
// start (the message on stderr says why).
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { dirname, extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import * as esbuild from "esbuild";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
const CHROMIUM_CANNOT_START = 3;

const { values: args } = parseArgs({
	options: {
		url: { type: "string" },
		name: { type: "string", default: "live" },
		seconds: { type: "string", default: "20" },
		screenshot: { type: "string" },
		latency: { type: "string" },
		serve: { type: "boolean", default: false },
		stdin: { type: "boolean", default: false },
	},
});
if (!args.url) {
	console.error("--url (the relay, e.g. http://127.0.0.1:4443/anon) is required");
	process.exit(1);
}

await esbuild.build({
	entryPoints: [join(here, "src/page.js")],
	bundle: true,
	format: "esm",
	splitting: true,
	outdir: join(here, "dist"),
	target: "chrome120",
	logLevel: "warning",
});

const TYPES = { ".html": "text/html", ".js": "text/javascript", ".map": "application/json", ".wasm": "application/wasm" };
const server = createServer(async (req, res) => {
	const path = new URL(req.url, "http://x").pathname;
	const file = normalize(join(here, path === "/" ? "index.html" : path));
	const served = file === join(here, "index.html") || file.startsWith(join(here, "dist") + "/");
	try {
		if (!served) throw new Error("not served");
		const body = await readFile(file);
		res.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream" });
		res.end(body);
	} catch {
		res.writeHead(404);
		res.end();
	}
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const query = new URLSearchParams({ url: args.url, name: args.name });
if (args.latency) query.set("latency", args.latency);
const pageUrl = `http://127.0.0.1:${server.address().port}/?${query}`;

if (args.serve) {
	console.log(pageUrl);
	process.on("SIGINT", () => process.exit(0));
	process.on("SIGTERM", () => process.exit(0));
} else {
	process.exitCode = await watch(pageUrl);
	server.close();
}

async function watch(url) {
	const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";
	const userDataDir = await mkdtemp(join(tmpdir(), "moq-watch-chromium-"));
	let context;
	try {
		context = await chromium.launchPersistentContext(userDataDir, {
			executablePath,
			headless: true,
			timeout: 30_000,
			viewport: { width: 660, height: 600 },
			args: [
				"--headless",
				"--no-sandbox",
				"--disable-gpu",
				"--no-first-run",
				"--disable-background-networking",
				"--disable-component-update",
				"--disable-sync",
				// Audio plays without a click.
				"--autoplay-policy=no-user-gesture-required",
			],
		});
	} catch (e) {
		console.error(`Chromium (${executablePath}) cannot start: ${e.message.split("\n")[0]}`);
		await rm(userDataDir, { recursive: true, force: true });
		return CHROMIUM_CANNOT_START;
	}
	const log = [];
	try {
		const page = context.pages()[0] ?? (await context.newPage());
		page.on("console", (m) => log.push(`${m.type()}: ${m.text()}`));
		page.on("pageerror", (e) => log.push(`pageerror: ${e.message}`));
		await page.goto(url, { timeout: 30_000 });
		await page.waitForFunction(() => window.moqWatchRecord?.connected, null, { timeout: 30_000 });
		console.log("ready");
		const played = new Promise((resolve) => setTimeout(resolve, Number(args.seconds) * 1000));
		const closed = new Promise((resolve) => {
			if (!args.stdin) return;
			process.stdin.on("end", resolve);
			process.stdin.resume();
		});
		await Promise.race([played, closed]);
		const record = await page.evaluate(() => window.moqWatchRecord);
		if (args.screenshot) await page.screenshot({ path: args.screenshot });
		const transport = log.some((l) => l.includes("connected via WebSocket"))
			? "websocket"
			: log.some((l) => l.includes("connected via WebTransport"))
				? "webtransport"
				: "unknown";
		const userAgent = await page.evaluate(() => navigator.userAgent);
		console.log(JSON.stringify({ userAgent, transport, ...record, log: log.slice(-50) }));
		return 0;
	} catch (e) {
		console.error(`the page failed: ${e.message}\n${log.join("\n")}`);
		return 1;
	} finally {
		await context.close();
		await rm(userDataDir, { recursive: true, force: true });
	}
}
