/** The media providers by kind: the embedded local generators unless configured otherwise. */
import type { MediaProvider } from './media-types.ts';
import { localImageProvider } from './image/local.ts';
import { localVideoProvider } from './video/local.ts';
import { localAudioProvider } from './audio/index.ts';

export type MediaProviders = Partial<Record<'image' | 'video' | 'audio', MediaProvider>>;

export function defaultMediaProviders(): MediaProviders {
  return { image: localImageProvider, video: localVideoProvider, audio: localAudioProvider };
}
