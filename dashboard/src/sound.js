// Alert sounds with the Web Audio API: four tones, a duration, per severity or global.

export const TONES = {
  classic: 'Classic Beep',
  siren: 'Warning Siren',
  chime: 'Gentle Chime',
  buzzer: 'Urgent Buzzer',
};

/** One period of each tone: [frequency Hz, seconds, oscillator type]. */
const PATTERNS = {
  classic: [[880, 0.18, 'square'], [0, 0.32]],
  siren: [[660, 0.25, 'sawtooth'], [990, 0.25, 'sawtooth']],
  chime: [[1318.5, 0.35, 'sine'], [987.8, 0.45, 'sine'], [0, 0.4]],
  buzzer: [[220, 0.12, 'square'], [0, 0.06], [220, 0.12, 'square'], [0, 0.2]],
};

export const DEFAULT_SOUND_PREFS = {
  enabled: true,
  mode: 'severity',            // 'severity' | 'global'
  globalTone: 'classic',
  tones: {error: 'buzzer', warning: 'siren', info: 'chime'},
  durationSeconds: 2,          // 1..30
  volume: 0.2,
};

/** The tone for `severity` under `prefs`. */
export function toneFor(prefs, severity) {
  if (prefs.mode === 'global') return prefs.globalTone;
  return (prefs.tones && prefs.tones[severity]) || prefs.globalTone || 'classic';
}

/** Schedule `tone` for `seconds` on an AudioContext; returns the nodes' count. */
export function scheduleTone(ctx, tone, seconds, volume = 0.2) {
  const pattern = PATTERNS[tone] || PATTERNS.classic;
  const gain = ctx.createGain();
  gain.gain.value = volume;
  gain.connect(ctx.destination);
  let t = ctx.currentTime + 0.02;
  const end = t + Math.max(1, Math.min(30, seconds));
  let nodes = 0;
  let last = null;
  while (t < end) {
    for (const [freq, dur, type] of pattern) {
      if (t >= end) break;
      const d = Math.min(dur, end - t);
      if (freq > 0) {
        const osc = ctx.createOscillator();
        osc.type = type || 'sine';
        osc.frequency.setValueAtTime(freq, t);
        osc.connect(gain);
        osc.start(t);
        osc.stop(t + d);
        last = osc;
        nodes++;
      }
      t += d;
    }
  }
  // Unhook the tone from the output when it ends, so finished tones do not pile up.
  if (last) last.onended = () => gain.disconnect();
  else gain.disconnect();
  return nodes;
}

function browserAudioContext() {
  const Ctx = typeof window !== 'undefined' && (window.AudioContext || window.webkitAudioContext);
  return Ctx ? new Ctx() : null;
}

const SEVERITY_RANK = {info: 0, warning: 1, error: 2};

/**
 * Plays alert sounds; one AudioContext, created on first use. While a tone
 * plays, alerts of the same or lower severity do not start another (a burst of
 * alerts is one sound, not a pile of overlapping 30 s tones); a more severe one
 * replaces it.
 */
export class SoundPlayer {
  constructor(prefs, createContext = browserAudioContext) {
    this.prefs = {...DEFAULT_SOUND_PREFS, ...prefs};
    this.createContext = createContext;
    this.ctx = null;
    this.played = 0;
    this.playing = null;      // {until (ms), rank}
  }
  context() {
    if (!this.ctx) {
      this.ctx = this.createContext();
      if (!this.ctx) return null;
    }
    if (this.ctx.state === 'suspended') this.ctx.resume().catch(() => {});
    return this.ctx;
  }
  /** Play the tone chosen for `severity` if sound is enabled. */
  playFor(severity, now = Date.now()) {
    if (!this.prefs.enabled) return false;
    const rank = SEVERITY_RANK[severity] ?? 0;
    if (this.playing && now < this.playing.until) {
      if (rank <= this.playing.rank) return false;
      this.stop();
    }
    if (!this.play(toneFor(this.prefs, severity))) return false;
    this.playing = {until: now + 1000 * Math.max(1, Math.min(30, this.prefs.durationSeconds)), rank};
    return true;
  }
  /** Play `tone` now (the Test button: always, replacing what plays). */
  play(tone, seconds = this.prefs.durationSeconds) {
    const ctx = this.context();
    if (!ctx) return false;
    scheduleTone(ctx, tone, seconds, this.prefs.volume);
    this.played++;
    return true;
  }
  /** Silence everything now. */
  stop() {
    this.playing = null;
    if (this.ctx) { this.ctx.close().catch(() => {}); this.ctx = null; }
  }
}
