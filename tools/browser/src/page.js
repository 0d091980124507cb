// Plays the broadcast named in the query string (`?url=http://127.0.0.1:PORT/anon&name=live`)
// with moq-dev's <moq-watch> element, and records what it draws: for every picture put on the
// canvas, its media timestamp (µs) and the wall clock at that moment (ms since the UNIX epoch).
// The runner (watch.mjs) reads the record as `window.moqWatchRecord`; a person sees the same
// figures under the picture.
import "@moq/watch/element";

/** hang's wall clock counts from 2020-01-01T00:00:00Z. */
const MOQ_EPOCH_UNIX_MS = 1_577_836_800_000;
/** Audio playhead samples kept: one per this many ms. */
const AUDIO_SAMPLE_MS = 100;

const params = new URLSearchParams(location.search);
const watch = document.createElement("moq-watch");
watch.setAttribute("url", params.get("url") ?? "");
watch.setAttribute("name", params.get("name") ?? "");
// Draw whether or not the page is on screen (a headless window has no viewport to scroll).
watch.setAttribute("visible", "always");
if (params.has("latency")) watch.setAttribute("latency", params.get("latency"));
watch.append(document.createElement("canvas"));
document.getElementById("player").append(watch);

const wallMs = () => performance.timeOrigin + performance.now();

const record = {
	/** [media timestamp µs, wall ms] per picture drawn. */
	frames: [],
	/** [audio playhead µs, wall ms], sampled. */
	audio: [],
	/** Whether the relay connection is up. */
	connected: false,
	/** The rendition the player chose, and the catalog it chose from. */
	track: undefined,
	catalog: undefined,
};
window.moqWatchRecord = record;

watch.renderer.out.timestamp.subscribe((ms) => {
	if (ms !== undefined) record.frames.push([Math.round(ms * 1000), wallMs()]);
});
watch.audio.out.timestamp.subscribe((ms) => {
	const now = wallMs();
	const last = record.audio.at(-1);
	if (ms !== undefined && ms > 0 && (!last || now - last[1] >= AUDIO_SAMPLE_MS)) {
		record.audio.push([Math.round(ms * 1000), now]);
	}
});
watch.connection.established.subscribe((connection) => {
	record.connected = connection !== undefined;
});
// Both are cleared when the broadcast ends: keep the last ones.
watch.broadcast.out.catalog.subscribe((catalog) => {
	if (catalog !== undefined) record.catalog = catalog;
});
watch.video.source.out.track.subscribe((track) => {
	if (track !== undefined) record.track = track;
});

/** Wall time (ms since the UNIX epoch) of media time 0, from the catalog's root clock. */
function clockZeroMs(catalog) {
	const clock = catalog?.clock;
	if (!clock || !Number.isFinite(clock.wall)) return undefined;
	const timescale = clock.timescale ?? 1_000_000;
	return MOQ_EPOCH_UNIX_MS + (clock.wall * 1000) / timescale;
}

function median(values) {
	if (values.length === 0) return undefined;
	const sorted = [...values].sort((a, b) => a - b);
	return sorted[Math.floor(sorted.length / 2)];
}

const stats = document.getElementById("stats");
setInterval(() => {
	const zero = clockZeroMs(record.catalog);
	const recent = record.frames.slice(-48);
	const latency = zero === undefined ? undefined : median(recent.map(([us, wall]) => wall - (zero + us / 1000)));
	stats.textContent = [
		`broadcast  ${params.get("name")} at ${params.get("url")}`,
		`rendition  ${record.track ?? "(none yet)"}`,
		`drawn      ${record.frames.length} pictures`,
		`latency    ${latency === undefined ? "(no catalog clock yet)" : `${latency.toFixed(0)} ms (median of the last ${recent.length}: drawn minus the catalog clock's time for the picture)`}`,
		`audio      ${record.audio.length ? `playing, playhead ${(record.audio.at(-1)[0] / 1e6).toFixed(2)} s` : "(none)"}`,
	].join("\n");
}, 500);
