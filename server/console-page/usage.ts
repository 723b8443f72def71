/**
 * The usage view: Gems charged per UTC day over the last 30 days as stacked
 * bars by kind of work (an SVG drawn here from the console API's figures: no
 * charting library, nothing from elsewhere, inside the page's CSP: colours come
 * from console.css classes, not inline styles), each bar's figures on hover and
 * all of them in a table; and each key's spend this month against its cap as a
 * `<meter>`.
 */
import type { components } from '../../generated/console.ts';

type Usage = components['schemas']['Usage'];
type Kind = keyof Usage['days'][number]['gems'];

export const KINDS: readonly Kind[] = ['image', 'video', 'audio', 'text', 'extraction'];

const SVG = 'http://www.w3.org/2000/svg';
const [WIDTH, HEIGHT, AXIS, TOP] = [600, 200, 26, 24];

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attributes: Record<string, string | number>, text?: string): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) el.setAttribute(name, String(value));
  if (text !== undefined) el.textContent = text;
  return el;
}

const dayLabel = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' });
const label = (day: string) => dayLabel.format(new Date(`${day}T00:00:00Z`));
const total = (gems: Usage['days'][number]['gems']) => KINDS.reduce((sum, k) => sum + gems[k], 0);
const gems = (n: number) => `${n.toLocaleString()} Gem${n === 1 ? '' : 's'}`;

/** What one day's bar says on hover and to a screen reader. */
function dayText({ day, gems: g }: Usage['days'][number]): string {
  const parts = KINDS.filter((k) => g[k] > 0).map((k) => `${k} ${g[k].toLocaleString()}`);
  return `${label(day)} (UTC): ${gems(total(g))}${parts.length ? ` — ${parts.join(', ')}` : ''}`;
}

/** The 30 days as stacked bars, one colour per kind, a label every week and the busiest day's total on the axis. */
export function dailyChart(days: Usage['days']): SVGSVGElement {
  const peak = Math.max(1, ...days.map((d) => total(d.gems)));
  const sum = days.reduce((s, d) => s + total(d.gems), 0);
  const chart = svg('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', class: 'usage-chart', 'aria-labelledby': 'usage-chart-title' });
  chart.append(svg('title', { id: 'usage-chart-title' }, `Gems charged per day over the last ${days.length} days: ${gems(sum)} in all`));
  const plot = HEIGHT - AXIS - TOP;
  const slot = WIDTH / days.length;
  chart.append(svg('line', { x1: 0, x2: WIDTH, y1: TOP + plot, y2: TOP + plot, class: 'axis' }));
  chart.append(svg('text', { x: 2, y: TOP - 6, class: 'tick' }, sum ? `busiest day: ${gems(peak)}` : `no Gems charged in these ${days.length} days`));
  days.forEach((d, i) => {
    const bar = svg('g', { class: 'day', 'data-day': d.day });
    bar.append(svg('title', {}, dayText(d)));
    // An invisible full-height target, so an empty or short day still shows its figures on hover.
    bar.append(svg('rect', { x: i * slot, y: TOP, width: slot, height: plot, class: 'hover' }));
    let y = TOP + plot;
    for (const kind of KINDS) {
      const h = (d.gems[kind] / peak) * plot;
      if (h <= 0) continue;
      y -= h;
      bar.append(svg('rect', { x: i * slot + 2, y, width: slot - 4, height: h, class: `kind-${kind}`, 'data-kind': kind, 'data-gems': d.gems[kind] }));
    }
    chart.append(bar);
    const last = i === days.length - 1; // today's label ends at the edge instead of running past it
    if ((days.length - 1 - i) % 7 === 0)
      chart.append(
        svg('text', { x: last ? WIDTH - 2 : i * slot + slot / 2, y: HEIGHT - 6, class: 'tick', 'text-anchor': last ? 'end' : 'middle' }, label(d.day)),
      );
  });
  return chart;
}

/** The legend: one swatch per kind, with the 30 days' total of each. */
export function legend(days: Usage['days']): HTMLUListElement {
  const list = document.createElement('ul');
  list.className = 'legend';
  for (const kind of KINDS) {
    const li = document.createElement('li');
    const swatch = svg('svg', { width: 12, height: 12, 'aria-hidden': 'true' });
    swatch.append(svg('rect', { width: 12, height: 12, class: `kind-${kind}` }));
    li.append(swatch, ` ${kind}: ${gems(days.reduce((s, d) => s + d.gems[kind], 0))}`);
    list.append(li);
  }
  return list;
}

/** The same figures as a table (days with charges only), for reading exact numbers. */
export function dailyTable(days: Usage['days']): HTMLTableElement {
  const table = document.createElement('table');
  const head = table.createTHead().insertRow();
  for (const h of ['Day (UTC)', ...KINDS, 'total']) head.append(Object.assign(document.createElement('th'), { textContent: h, scope: 'col' }));
  const body = table.createTBody();
  for (const d of [...days].reverse()) {
    if (total(d.gems) === 0) continue;
    const row = body.insertRow();
    row.append(Object.assign(document.createElement('th'), { textContent: label(d.day), scope: 'row' }));
    for (const n of [...KINDS.map((k) => d.gems[k]), total(d.gems)]) row.insertCell().textContent = n.toLocaleString();
  }
  return table;
}

/** One key's spend this month against its cap: a meter (none without a cap) and the figures in words. */
export function keySpend(key: Usage['keys'][number]): HTMLLIElement {
  const li = document.createElement('li');
  li.dataset.keyId = key.id;
  const name = document.createElement('strong');
  name.textContent = `${key.name} ${key.hint}`;
  const words = document.createElement('span');
  li.append(name, ' ');
  if (key.monthlyCap === null) {
    words.textContent = `${gems(key.spendThisMonth)} this month, no cap`;
    li.append(words);
    return li;
  }
  const meter = document.createElement('meter');
  meter.min = 0;
  meter.max = Math.max(1, key.monthlyCap);
  meter.value = Math.min(key.spendThisMonth, meter.max);
  meter.high = meter.max * 0.8;
  meter.optimum = 0;
  meter.setAttribute('aria-label', `${key.name}: spend this month against its cap`);
  const percent = key.monthlyCap > 0 ? ` (${Math.round((key.spendThisMonth / key.monthlyCap) * 100)}%)` : '';
  words.textContent = key.monthlyCap === 0 ? 'cap 0: spending disabled' : `${key.spendThisMonth.toLocaleString()} of ${gems(key.monthlyCap)}${percent}`;
  li.append(meter, ' ', words);
  return li;
}
