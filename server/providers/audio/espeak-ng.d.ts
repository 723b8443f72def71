/** Types for the npm `espeak-ng` package (eSpeak NG compiled to WebAssembly with Emscripten; GPL-3.0-or-later). */
declare module 'espeak-ng' {
  interface EspeakModule {
    FS: { readFile(path: string): Uint8Array };
  }
  interface EspeakOptions {
    /** Command-line arguments of the `espeak-ng` program (main runs once on instantiation). */
    arguments: string[];
    print?(text: string): void;
    printErr?(text: string): void;
    /** Emscripten hook: instantiate the wasm ourselves (from a cached compiled module). */
    instantiateWasm?(imports: WebAssembly.Imports, done: (instance: WebAssembly.Instance, module: WebAssembly.Module) => void): object;
  }
  export default function ESpeakNg(options: EspeakOptions): Promise<EspeakModule>;
}
