/**
 * Work that must finish before the database closes: a text generation runs to
 * its settlement whether or not its client still listens, so a shutdown waits
 * for it (bounded) instead of leaving its identity pending forever.
 */
export class InflightWork {
  private readonly running = new Set<Promise<unknown>>();

  /** Tracks `work` until it settles; returns it unchanged. */
  track<T>(work: Promise<T>): Promise<T> {
    this.running.add(work);
    void work.finally(() => this.running.delete(work)).catch(() => undefined);
    return work;
  }

  get size(): number {
    return this.running.size;
  }

  /** Resolves when everything tracked has settled, or after `timeoutMs`; true when all settled. */
  async drain(timeoutMs: number): Promise<boolean> {
    if (timeoutMs <= 0) return this.running.size === 0;
    const all = Promise.allSettled([...this.running]).then(() => true);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    try {
      return await Promise.race([all, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}
