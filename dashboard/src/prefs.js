// Preferences kept in the browser: sound, display, webhook settings and the
// list of servers (tokens stay in sessionStorage, per server).
import {DEFAULT_SOUND_PREFS} from './sound.js';
import {DEFAULT_RANGE_SECONDS} from './buffers.js';

const KEY = 'rill.dashboard.prefs.v1';

export const DEFAULT_PREFS = {
  sound: DEFAULT_SOUND_PREFS,
  rangeSeconds: DEFAULT_RANGE_SECONDS,
  webhook: {url: '', format: 'slack', enabled: false},
  servers: [],               // [{baseUrl}] besides the page's own server
};

function storage(kind) {
  try { return kind === 'session' ? window.sessionStorage : window.localStorage; } catch (_) { return null; }
}

export function loadPrefs() {
  const s = storage('local');
  let saved = {};
  try { saved = JSON.parse((s && s.getItem(KEY)) || '{}') || {}; } catch (_) { saved = {}; }
  return {
    ...DEFAULT_PREFS, ...saved,
    sound: {...DEFAULT_PREFS.sound, ...(saved.sound || {}),
            tones: {...DEFAULT_PREFS.sound.tones, ...((saved.sound || {}).tones || {})}},
    webhook: {...DEFAULT_PREFS.webhook, ...(saved.webhook || {})},
  };
}

export function savePrefs(prefs) {
  const s = storage('local');
  if (s) s.setItem(KEY, JSON.stringify(prefs));
}

export function loadToken(baseUrl) {
  const s = storage('session');
  return (s && s.getItem(`rill.token:${baseUrl}`)) || '';
}

export function saveToken(baseUrl, token) {
  const s = storage('session');
  if (!s) return;
  if (token) s.setItem(`rill.token:${baseUrl}`, token);
  else s.removeItem(`rill.token:${baseUrl}`);
}

/** Hidden alerts ("Clear" hides entries in this browser only). */
export function loadClearedAt(baseUrl) {
  const s = storage('local');
  return Number((s && s.getItem(`rill.cleared:${baseUrl}`)) || 0);
}

export function saveClearedAt(baseUrl, ts) {
  const s = storage('local');
  if (s) s.setItem(`rill.cleared:${baseUrl}`, String(ts));
}
