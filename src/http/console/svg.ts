/**
 * Drawings as inline SVG, no map tiles and no chart library: the rider's path from the
 * location events, and a level over time (the AWB pool). Each carries a text summary
 * for screen readers and for anyone who prefers numbers.
 */
import { html } from "./html.ts";
import type { JSXNode } from "./html.ts";

export interface PathPoint {
  latitude: number;
  longitude: number;
  at: Date;
}

const W = 640;
const H = 360;
const PAD = 24;
/** The drawings' box (their viewBox) and the padding inside it. */
export const BOX = { width: W, height: H, pad: PAD } as const;

/** Great-circle distance in km. */
export function distanceKm(a: PathPoint, b: PathPoint): number {
  const rad = Math.PI / 180;
  const dLat = (b.latitude - a.latitude) * rad;
  const dLng = (b.longitude - a.longitude) * rad;
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(a.latitude * rad) * Math.cos(b.latitude * rad) * Math.sin(dLng / 2) ** 2;
  return 2 * 6371 * Math.asin(Math.min(1, Math.sqrt(h)));
}

/**
 * A path's span below this many degrees (about 55 m) counts as this much: a rider standing
 * still, or a straight north-south or east-west ride, has a span of zero one way or both,
 * and a waiting rider's GPS jitter of a few metres should not be blown up to fill the box.
 */
const MIN_SPAN_DEG = 5e-4;

/**
 * The path scaled into the box, north up, east right, kilometres equal both ways: one
 * scale, the largest at which the path fits both the box's width and its height, and the
 * path centred. A wide, flat ride reaches from the left padding to the right one; a tall
 * one from the top to the bottom; a single point sits in the middle.
 */
export function riderPath(points: readonly PathPoint[], describe: (at: Date) => string): JSXNode {
  if (points.length === 0) return html`<p>No rider locations yet.</p>`;
  const midLat = points.reduce((s, p) => s + p.latitude, 0) / points.length;
  // A degree of longitude is cos(latitude) times as long as a degree of latitude.
  const kx = Math.cos((midLat * Math.PI) / 180);
  const xs = points.map((p) => p.longitude * kx);
  const ys = points.map((p) => p.latitude);
  const [minX, maxX, minY, maxY] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  const [spanX, spanY] = [maxX - minX, maxY - minY];
  const scale = Math.min((W - 2 * PAD) / Math.max(spanX, MIN_SPAN_DEG), (H - 2 * PAD) / Math.max(spanY, MIN_SPAN_DEG));
  const x = (i: number) => (PAD + (W - 2 * PAD - spanX * scale) / 2 + (xs[i]! - minX) * scale).toFixed(1);
  const y = (i: number) => (H - PAD - (H - 2 * PAD - spanY * scale) / 2 - (ys[i]! - minY) * scale).toFixed(1);
  const line = points.map((_, i) => `${x(i)},${y(i)}`).join(" ");
  let km = 0;
  for (let i = 1; i < points.length; i++) km += distanceKm(points[i - 1]!, points[i]!);
  const first = points[0]!;
  const last = points[points.length - 1]!;
  const summary =
    `${points.length} location${points.length === 1 ? "" : "s"} from ${describe(first.at)} to ${describe(last.at)}, ` +
    `${km.toFixed(2)} km along the path; last at ${last.latitude.toFixed(5)}, ${last.longitude.toFixed(5)}.`;
  const end = points.length - 1;
  return html`<figure>
    <svg viewBox=${`0 0 ${W} ${H}`} role="img" aria-labelledby="path-title path-desc" xmlns="http://www.w3.org/2000/svg">
      <title id="path-title">The rider's path</title>
      <desc id="path-desc">${summary}</desc>
      <polyline points=${line} fill="none" stroke="#1a4fbf" stroke-width="3" stroke-linejoin="round" stroke-linecap="round" />
      <circle cx=${x(0)} cy=${y(0)} r="7" fill="#1d6b34"><title>First location</title></circle>
      <circle cx=${x(end)} cy=${y(end)} r="8" fill="#a32020" stroke="#fff" stroke-width="2"><title>Latest location</title></circle>
    </svg>
    <figcaption>${summary} Green: first location; red: latest. North is up.</figcaption>
  </figure>`;
}

export interface LevelPoint {
  at: Date;
  level: number;
}

/** A level over time as steps, with a dashed line at `mark` (the low watermark). */
export function levelChart(points: readonly LevelPoint[], o: { from: Date; to: Date; mark: number; label: string; describe: (at: Date) => string }): JSXNode {
  const t0 = o.from.getTime();
  const t1 = Math.max(o.to.getTime(), t0 + 1);
  const top = Math.max(o.mark, ...points.map((p) => p.level), 1) * 1.1;
  const px = (at: number) => (PAD * 2 + ((at - t0) / (t1 - t0)) * (W - PAD * 3)).toFixed(1);
  const py = (level: number) => (H - PAD - (level / top) * (H - PAD * 2)).toFixed(1);
  let d = "";
  points.forEach((p, i) => {
    const at = Math.min(Math.max(p.at.getTime(), t0), t1);
    d += i === 0 ? `M${px(at)},${py(p.level)}` : `H${px(at)}V${py(p.level)}`;
  });
  if (points.length > 0) d += `H${px(t1)}`;
  const now = points[points.length - 1]?.level ?? 0;
  const low = Math.min(...points.map((p) => p.level), now);
  const summary = `${o.label}: ${now} now; lowest ${low} and highest ${Math.max(...points.map((p) => p.level), now)} between ${o.describe(o.from)} and ${o.describe(o.to)}; low watermark ${o.mark}.`;
  return html`<figure>
    <svg viewBox=${`0 0 ${W} ${H}`} role="img" aria-labelledby="level-title level-desc" xmlns="http://www.w3.org/2000/svg">
      <title id="level-title">${o.label}</title>
      <desc id="level-desc">${summary}</desc>
      <line x1=${px(t0)} x2=${px(t1)} y1=${py(0)} y2=${py(0)} stroke="#8a939e" />
      <line x1=${px(t0)} x2=${px(t1)} y1=${py(o.mark)} y2=${py(o.mark)} stroke="#a32020" stroke-dasharray="6 5" />
      <text x=${px(t0)} y=${Number(py(o.mark)) - 6} font-size="14" fill="#a32020">low watermark ${o.mark}</text>
      <text x="4" y=${py(0)} font-size="14" fill="#4f5660">0</text>
      <text x="4" y=${Number(py(Math.round(top / 1.1))) + 5} font-size="14" fill="#4f5660">${Math.round(top / 1.1)}</text>
      <path d=${d} fill="none" stroke="#1a4fbf" stroke-width="3" />
    </svg>
    <figcaption>${summary}</figcaption>
  </figure>`;
}
