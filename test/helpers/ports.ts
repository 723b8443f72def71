/** A TCP port on 127.0.0.1 free a moment ago, for a process the test starts with a fixed PORT (npm start, npm run dev, the demo). */
import net from 'node:net';

export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
