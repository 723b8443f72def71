/**
 * The calls test/generated-clients.test.ts makes through each generated client:
 * the same few, so the two generators are held to the same behaviour.
 */
export interface CoreCalls {
  /** The model IDs discovery lists. */
  models(): Promise<string[]>;
  /** An image submission under `idempotencyKey`. */
  image(prompt: string, idempotencyKey: string): Promise<{ status: number; taskId: string }>;
  /** One read of a task: its status and its outputs' signed URLs. */
  task(id: string): Promise<{ status: string; urls: string[] }>;
  /** An output's bytes through its signed URL. */
  download(url: string): Promise<{ contentType: string | null; bytes: Uint8Array }>;
  /** A reference upload of raw bytes of `contentType`. */
  upload(bytes: Uint8Array<ArrayBuffer>, contentType: string): Promise<{ status: number; id: string; kind: string }>;
  /** The public voices. */
  voices(): Promise<string[]>;
  /** A speech submission in a voice. */
  speech(voiceProfileId: string, idempotencyKey: string): Promise<{ status: number; taskId: string }>;
}
