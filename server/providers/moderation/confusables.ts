/**
 * Look-alike letters with two readings. Unicode's confusables data (through the
 * `obscenity` table that fold() applies) gives each look-alike one Latin
 * letter, but a few stand for two: Cyrillic у (U+0443) is listed as "y" and is
 * written for "u" just as often ("smуggling", "nуde"). A text holding one is
 * also read with the second reading; the policy refuses it when either reading
 * breaks it. Letters that fold() reads otherwise are corrected here too (the
 * Catalan ŀ, which NFKC turns into "l·").
 */

/** Look-alike → its second reading (lower and upper case). */
const SECOND_READINGS = new Map<string, string>([
  ['у', 'u'],
  ['У', 'U'], // CYRILLIC SMALL/CAPITAL LETTER U: "y" to the confusables table
  ['ү', 'u'],
  ['Ү', 'U'], // CYRILLIC SMALL/CAPITAL LETTER STRAIGHT U
  ['ŀ', 'l'],
  ['Ŀ', 'L'], // LATIN SMALL/CAPITAL LETTER L WITH MIDDLE DOT
]);

const HAS_SECOND_READING = new RegExp(`[${[...SECOND_READINGS.keys()].join('')}]`, 'u');
const EVERY_SECOND_READING = new RegExp(HAS_SECOND_READING.source, 'gu');

/** The text with each look-alike given its second reading; undefined when it holds none (one native scan). */
export function secondReading(text: string): string | undefined {
  if (!HAS_SECOND_READING.test(text)) return undefined;
  return text.replace(EVERY_SECOND_READING, (c) => SECOND_READINGS.get(c)!);
}
