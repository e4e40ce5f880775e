/**
 * The rider's path (src/http/console/svg.ts): drawn north up with kilometres equal both
 * ways, at the largest scale that fits the box, centred; and the distance in its summary.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { BOX, riderPath } from "../../src/http/console/svg.ts";
import type { PathPoint } from "../../src/http/console/svg.ts";

const { width: W, height: H, pad: PAD } = BOX;
/** Coordinates are written with one decimal. */
const EPS = 0.06;
const t0 = Date.parse("2026-11-23T10:00:00Z");
const path = (coords: readonly (readonly [number, number])[]): PathPoint[] => coords.map(([latitude, longitude], i) => ({ latitude, longitude, at: new Date(t0 + i * 60_000) }));
const describe_ = (at: Date) => at.toISOString().slice(11, 16);

interface Drawn {
  points: { x: number; y: number }[];
  first: { x: number; y: number };
  last: { x: number; y: number };
  summary: string;
  html: string;
}

async function draw(coords: readonly (readonly [number, number])[]): Promise<Drawn> {
  const html = await riderPath(path(coords), describe_).toString();
  assert.match(html, new RegExp(`viewBox="0 0 ${W} ${H}"`));
  const list = /<polyline points="([^"]*)"/.exec(html)?.[1];
  assert.ok(list !== undefined, html);
  const points = list.split(" ").map((pair) => {
    const [x, y] = pair.split(",").map(Number);
    return { x: x!, y: y! };
  });
  const circle = (title: string) => {
    const m = new RegExp(`<circle cx="([\\d.-]+)" cy="([\\d.-]+)"[^>]*><title>${title}</title>`).exec(html);
    assert.ok(m, `${title} circle in ${html}`);
    return { x: Number(m[1]), y: Number(m[2]) };
  };
  const summary = /<desc id="path-desc">([^<]*)<\/desc>/.exec(html)?.[1] ?? "";
  return { points, first: circle("First location"), last: circle("Latest location"), summary, html };
}

const bounds = (d: Drawn) => ({
  minX: Math.min(...d.points.map((p) => p.x)),
  maxX: Math.max(...d.points.map((p) => p.x)),
  minY: Math.min(...d.points.map((p) => p.y)),
  maxY: Math.max(...d.points.map((p) => p.y)),
});
const near = (actual: number, expected: number, what: string, eps = EPS) => assert.ok(Math.abs(actual - expected) <= eps, `${what}: ${actual}, expected ${expected} ± ${eps}`);
const inside = (d: Drawn) => {
  for (const p of d.points) {
    assert.ok(p.x >= PAD - EPS && p.x <= W - PAD + EPS, `x ${p.x} inside [${PAD}, ${W - PAD}]`);
    assert.ok(p.y >= PAD - EPS && p.y <= H - PAD + EPS, `y ${p.y} inside [${PAD}, ${H - PAD}]`);
  }
};

/** Bengaluru, a ride about 11 km east-west and 1 km north-south. */
const WIDE = [
  [12.9716, 77.55],
  [12.975, 77.58],
  [12.9705, 77.61],
  [12.9762, 77.65],
] as const;
/** About 11 km north-south and 1.5 km east-west. */
const TALL = [
  [12.9, 77.6],
  [12.93, 77.61],
  [12.96, 77.595],
  [13.0, 77.6135],
] as const;

describe("the rider's path", () => {
  it("a wide, flat ride reaches from the left padding to the right one, centred top to bottom", async () => {
    const d = await draw(WIDE);
    const b = bounds(d);
    near(b.minX, PAD, "left edge");
    near(b.maxX, W - PAD, "right edge");
    near((b.minY + b.maxY) / 2, H / 2, "vertical centre");
    assert.ok(b.maxY - b.minY < H - 2 * PAD, "not stretched to the full height");
    inside(d);
  });

  it("a tall ride reaches from the top padding to the bottom one, centred left to right", async () => {
    const d = await draw(TALL);
    const b = bounds(d);
    near(b.minY, PAD, "top edge");
    near(b.maxY, H - PAD, "bottom edge");
    near((b.minX + b.maxX) / 2, W / 2, "horizontal centre");
    assert.ok(b.maxX - b.minX < W - 2 * PAD, "not stretched to the full width");
    inside(d);
  });

  it("keeps kilometres equal both ways: a ride as wide as it is tall (in km) is as wide as it is tall on screen", async () => {
    const lat = 12.95;
    const dLat = 0.02;
    const dLng = dLat / Math.cos((lat * Math.PI) / 180);
    const d = await draw([
      [lat, 77.6],
      [lat + dLat, 77.6 + dLng],
    ]);
    const b = bounds(d);
    near(b.maxX - b.minX, b.maxY - b.minY, "width against height", 1);
    near(b.maxY - b.minY, H - 2 * PAD, "fits the height");
  });

  it("north is up and east is right", async () => {
    const d = await draw(TALL);
    const ys = d.points.map((p) => p.y);
    // TALL goes north at every step: each point is higher on screen (a smaller y) than the one before.
    for (let i = 1; i < ys.length; i++) assert.ok(ys[i]! < ys[i - 1]!, `point ${i} (y ${ys[i]}) is above point ${i - 1} (y ${ys[i - 1]})`);
    const w = await draw(WIDE);
    const xs = w.points.map((p) => p.x);
    for (let i = 1; i < xs.length; i++) assert.ok(xs[i]! > xs[i - 1]!, `point ${i} is right of point ${i - 1}`);
    assert.deepEqual(w.first, w.points[0]);
    assert.deepEqual(w.last, w.points[w.points.length - 1]);
  });

  it("points stay inside the box for rides of every shape", async () => {
    const rides: (readonly (readonly [number, number])[])[] = [WIDE, TALL];
    let seed = 7;
    const random = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646;
    for (let r = 0; r < 20; r++) rides.push(Array.from({ length: 2 + Math.floor(random() * 30) }, () => [12.9 + random() * 0.1 * random(), 77.5 + random() * 0.2 * random()] as const));
    for (const ride of rides) inside(await draw(ride));
  });

  it("a single point sits in the middle", async () => {
    const d = await draw([[12.9716, 77.5946]]);
    assert.equal(d.points.length, 1);
    near(d.points[0]!.x, W / 2, "x");
    near(d.points[0]!.y, H / 2, "y");
    assert.match(d.summary, /^1 location from 10:00 to 10:00, 0\.00 km along the path; last at 12\.97160, 77\.59460\.$/);
  });

  it("a rider standing still (the same point again and again) sits in the middle", async () => {
    const d = await draw([
      [12.9716, 77.5946],
      [12.9716, 77.5946],
      [12.9716, 77.5946],
    ]);
    for (const p of d.points) assert.deepEqual(p, { x: W / 2, y: H / 2 });
  });

  it("a straight north-south ride is a vertical line from top to bottom, centred", async () => {
    const d = await draw([
      [12.93, 77.6],
      [12.95, 77.6],
      [12.97, 77.6],
    ]);
    for (const p of d.points) near(p.x, W / 2, "x");
    const b = bounds(d);
    near(b.minY, PAD, "top");
    near(b.maxY, H - PAD, "bottom");
  });

  it("a straight east-west ride is a horizontal line from left to right, centred", async () => {
    const d = await draw([
      [12.95, 77.58],
      [12.95, 77.6],
      [12.95, 77.62],
    ]);
    for (const p of d.points) near(p.y, H / 2, "y");
    const b = bounds(d);
    near(b.minX, PAD, "left");
    near(b.maxX, W - PAD, "right");
  });

  it("a few metres of GPS jitter are not blown up to fill the box", async () => {
    // About 2 m apart: drawn a few units either side of the middle, not across the box.
    const d = await draw([
      [12.97160, 77.59460],
      [12.97162, 77.59461],
    ]);
    for (const p of d.points) {
      near(p.x, W / 2, "x", 10);
      near(p.y, H / 2, "y", 10);
    }
  });

  it("the summary gives the distance along the path", async () => {
    // Central Bengaluru (MG Road) to Koramangala: 5.18 km on a sphere of radius 6371 km.
    const d = await draw([
      [12.9716, 77.5946],
      [12.9352, 77.6245],
    ]);
    const km = Number(/, ([\d.]+) km along the path/.exec(d.summary)?.[1]);
    near(km, 5.16, "km", 0.05);
    assert.match(d.summary, /^2 locations from 10:00 to 10:01, /);
    assert.match(d.html, /<figcaption>.*North is up\.<\/figcaption>/);
  });

  it("without locations it says so", async () => {
    assert.equal(await riderPath([], describe_).toString(), "<p>No rider locations yet.</p>");
  });
});
