// Query results from the server's JSON format.
import {listOf} from './state.js';

/** A JSON query response -> {columns: [names], rows: [objects]}. */
export function readResult(data) {
  const cols = (data && data.columns) || [];
  const columns = cols.map((c) => (typeof c === 'string' ? c : c.name));
  const rows = listOf(data, 'rows', 'data').map((r) => {
    if (!Array.isArray(r)) return r;
    const o = {};
    columns.forEach((c, i) => { o[c] = r[i]; });
    return o;
  });
  if (!columns.length && rows.length) columns.push(...Object.keys(rows[0]));
  return {columns, rows};
}
