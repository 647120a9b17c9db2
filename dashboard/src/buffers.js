// Bounded client-side buffers, so the page's memory stays flat over hours.

/** A time series of at most `capacity` points ({x, y}); the oldest fall off. */
export class SeriesBuffer {
  constructor(capacity = 2000) {
    if (!(capacity > 0)) throw new RangeError('capacity must be > 0');
    this.capacity = capacity;
    this.xs = new Float64Array(capacity);
    this.ys = new Float64Array(capacity);
    this.start = 0;
    this.length = 0;
  }
  /** Append a point; x must be non-decreasing (older points are ignored). */
  push(x, y) {
    if (this.length > 0 && x < this.lastX()) return false;
    const i = (this.start + this.length) % this.capacity;
    this.xs[i] = x;
    this.ys[i] = y;
    if (this.length < this.capacity) this.length++;
    else this.start = (this.start + 1) % this.capacity;
    return true;
  }
  lastX() { return this.length ? this.xs[(this.start + this.length - 1) % this.capacity] : -Infinity; }
  lastY() { return this.length ? this.ys[(this.start + this.length - 1) % this.capacity] : NaN; }
  /** Points with x >= since, oldest first, as [{x, y}]. */
  points(since = -Infinity) {
    const out = [];
    for (let k = 0; k < this.length; k++) {
      const i = (this.start + k) % this.capacity;
      if (this.xs[i] >= since) out.push({x: this.xs[i], y: this.ys[i]});
    }
    return out;
  }
  clear() { this.start = 0; this.length = 0; }
}

/** A list of at most `capacity` items, newest last. */
export class BoundedList {
  constructor(capacity = 1000) {
    this.capacity = capacity;
    this.items = [];
  }
  push(item) {
    this.items.push(item);
    if (this.items.length > this.capacity) this.items.splice(0, this.items.length - this.capacity);
  }
  get length() { return this.items.length; }
  clear() { this.items = []; }
}

/**
 * Down-sample points to at most `target` with min/max per bucket (keeps spikes).
 * Used when a server hands more points than the chart has pixels for.
 */
export function downsampleMinMax(points, target) {
  if (points.length <= target || target < 4) return points.slice();
  const buckets = Math.floor(target / 2);
  const size = points.length / buckets;
  const out = [];
  for (let b = 0; b < buckets; b++) {
    const lo = Math.floor(b * size);
    const hi = Math.min(points.length, Math.floor((b + 1) * size));
    let min = points[lo];
    let max = points[lo];
    for (let i = lo + 1; i < hi; i++) {
      if (points[i].y < min.y) min = points[i];
      if (points[i].y > max.y) max = points[i];
    }
    if (min === max) out.push(min);
    else if (min.x <= max.x) out.push(min, max);
    else out.push(max, min);
  }
  return out;
}

/** The time-range choices of the control bar, in seconds (Infinity = all). */
export const TIME_RANGES = [
  {label: '30 s', seconds: 30}, {label: '60 s', seconds: 60}, {label: '90 s', seconds: 90},
  {label: '100 s', seconds: 100}, {label: '180 s', seconds: 180}, {label: '300 s', seconds: 300},
  {label: 'All', seconds: Infinity},
];
export const DEFAULT_RANGE_SECONDS = 90;

/** History points to ask the server for: about twice a chart's pixel width (bounded). */
export function pointsForWidth(pixels) {
  const w = Number(pixels);
  return Math.max(200, Math.min(8000, Math.round(2 * (Number.isFinite(w) && w > 0 ? w : 600))));
}
