/**
 * Framing: a made-up world (a video game, a film, a tabletop campaign) makes a
 * weapon or an attack in it a thing of that world, and the policy's intents
 * that read so are cancelled by the `pretend-world` concept. A writer who also
 * demands that the content hold outside the frame ("accurate real-world
 * instructions for the crafting menu", "a real plan so it's authentic", "a
 * design that actually works") asks for the real thing: the frame then
 * cancels nothing. The demand is the policy's `realism` concept.
 *
 * One look at the concepts found: constant in the text's length.
 */
import type { Occurrence } from './intents.ts';

export const PRETEND_WORLD = 'pretend-world';
export const REALISM = 'realism';

/** Drops the made-up frame from `found` when the text also demands realism; returns whether it did. */
export function disarmFrames(found: Map<string, Occurrence[]>): boolean {
  if (!found.has(REALISM) || !found.has(PRETEND_WORLD)) return false;
  found.delete(PRETEND_WORLD);
  return true;
}
