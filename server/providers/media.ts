/** The media providers by kind: the embedded local generators unless configured otherwise. */
import type { MediaProviders } from './media-types.ts';
import { localImageProvider } from './image/local.ts';
import { localVideoProvider } from './video/local.ts';
import { localAudioProvider } from './audio/index.ts';

export type { MediaProviders };

export function defaultMediaProviders(): MediaProviders {
  return { image: localImageProvider, video: localVideoProvider, audio: localAudioProvider };
}
