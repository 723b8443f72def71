/**
 * The embedded media providers with the image generator's calls counted: the
 * outage tests' proof that an output was made (or bought) once, however many
 * times its job was handed back.
 */
import { defaultMediaProviders } from '../../server/providers/media.ts';
import type { MediaProviders } from '../../server/providers/media-types.ts';

export function countingProviders(): { providers: MediaProviders; calls: () => number } {
  const base = defaultMediaProviders();
  const image = base.image!;
  let calls = 0;
  return {
    providers: { ...base, image: { ...image, generate: (job, tools) => (calls++, image.generate(job, tools)) } },
    calls: () => calls,
  };
}
