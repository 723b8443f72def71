/**
 * Every media parameter the contract accepts is one the code honours (none is
 * silently ignored). Each table maps a contract parameter (the generated `MediaParameters*`
 * types) to the field of the provider's job request it becomes, or says why it
 * has none. The tables are typed `Record<keyof Params, …>`: a parameter added to
 * the contract and regenerated fails the typecheck here until someone decides
 * where it goes. test/media-parameters.test.ts holds each table to what the
 * preparers really build, and proves each image parameter changes the picture.
 */
import type { components } from '../../generated/api.ts';
import type { ImageJobRequest, MusicJobRequest, SpeechJobRequest, VideoJobRequest } from '../providers/media-types.ts';

type Params<S extends 'MediaParametersImage' | 'MediaParametersVideo' | 'MediaParametersSpeech' | 'MediaParametersMusic'> = keyof NonNullable<
  components['schemas'][S]
>;

/** Where a parameter goes: the job request field(s) it sets, or why none. */
export type ParameterUse<Field extends string> = { sets: readonly Field[] } | { checkedOnly: string };

export const IMAGE_PARAMETERS = {
  ratio: { sets: ['ratio', 'width', 'height'] },
  resolution: { sets: ['resolution', 'width', 'height'] },
  outputCount: { sets: ['outputCount'] },
  negativePrompt: { sets: ['negativePrompt'] },
  magicPrompt: { sets: ['magicPrompt'] },
  sourceImage: { sets: ['sourceImage'] },
  background: { sets: ['background'] },
  variant: { sets: ['variant'] },
  style: { sets: ['style'] },
  outputFormat: { sets: ['outputFormat', 'mimeType'] },
  seed: { sets: ['seed'] },
} as const satisfies Record<Params<'MediaParametersImage'>, ParameterUse<keyof ImageJobRequest>>;

export const VIDEO_PARAMETERS = {
  mode: { sets: ['mode'] },
  sourceImage: { sets: ['sourceImage'] },
  endFrame: { sets: ['endFrame'] },
  duration: { sets: ['duration'] },
  ratio: { sets: ['ratio', 'width', 'height'] },
  resolution: { sets: ['resolution', 'width', 'height'] },
  audio: { sets: ['audio'] },
  referenceVideo: { sets: ['referenceVideos'] },
  referenceVideos: { sets: ['referenceVideos'] },
  referenceAudios: { sets: ['referenceAudios'] },
  seed: { sets: ['seed'] },
} as const satisfies Record<Params<'MediaParametersVideo'>, ParameterUse<keyof VideoJobRequest>>;

export const AUDIO_PARAMETERS = {
  voiceProfileId: { sets: ['voice'] },
  speed: { sets: ['speed'] },
  volume: { sets: ['volume'] },
  temperature: { sets: ['temperature'] },
  musicMode: { sets: ['musicMode'] },
  instrumental: { sets: ['instrumental'] },
  style: { sets: ['style'] },
  title: { sets: ['title'] },
  negativeTags: { sets: ['negativeTags'] },
  vocalGender: { sets: ['vocalGender'] },
  duration: { sets: ['durationSeconds'] },
  coverAudio: { sets: ['coverAudio'] },
  seed: { sets: ['seed'] },
} as const satisfies Record<Params<'MediaParametersSpeech'> | Params<'MediaParametersMusic'>, ParameterUse<keyof SpeechJobRequest | keyof MusicJobRequest>>;
