// Toast notifications, coloured by severity, closable, gone after 6 s.
import {h} from './dom.js';
import {SEVERITY_BADGE} from './alerts.js';

export const TOAST_MS = 6000;
const MAX_TOASTS = 5;

export function showToast(container, {severity = 'info', title, message}) {
  const close = h('button.toast-close', {'aria-label': 'Close notification', title: 'Close', text: '×'});
  const el = h(`div.toast.sev-${severity}`, {role: 'status'},
    h('div.toast-title', {}, SEVERITY_BADGE[severity] || severity, title ? ` · ${title}` : ''),
    h('div.toast-body', {text: message}), close);
  el.dataset.created = String(Math.round(performance.now()));
  const remove = () => { el.classList.add('leaving'); setTimeout(() => el.remove(), 200); };
  close.addEventListener('click', remove);
  container.append(el);
  while (container.children.length > MAX_TOASTS) container.firstElementChild.remove();
  setTimeout(remove, TOAST_MS);
  return el;
}
