/**
 * Framing: a made-up world (a video game, a film, a tabletop campaign) makes a
 * weapon or an attack in it a thing of that world, and the policy's intents
 * that read so are cancelled by the `pretend-world` concept. A writer who also
 * demands that the content hold outside the frame ("accurate real-world
 * instructions for the crafting menu", "a real plan so it's authentic", "a
 * design that actually works") asks for the real thing: the frame then
 * cancels nothing. The demand is the policy's `realism` concept.
 *
 * Likewise a writer who declines help ("I don't want a hotline", "don't talk me
 * out of it") is not asking about recovery, though the refusal holds its words:
 * the policy's `refuse-help` concept disarms `recovery`.
 *
 * One look at the concepts found: constant in the text's length.
 */
import type { Occurrence } from './intents.ts';

export const PRETEND_WORLD = 'pretend-world';
export const REALISM = 'realism';
export const RECOVERY = 'recovery';
export const REFUSE_HELP = 'refuse-help';

/** Drops from `found` the frames the text itself disarms (a made-up world, recovery); returns whether it dropped one. */
export function disarmFrames(found: Map<string, Occurrence[]>): boolean {
  let dropped = false;
  if (found.has(REALISM)) dropped = found.delete(PRETEND_WORLD);
  if (found.has(REFUSE_HELP)) dropped = found.delete(RECOVERY) || dropped;
  return dropped;
}
