// Files imported `with { type: "file" }` resolve to a path (embedded in the compiled executable).
declare module "*.so" {
  const path: string;
  export default path;
}
declare module "*.safetensors" {
  const path: string;
  export default path;
}
declare module "*.model" {
  const path: string;
  export default path;
}
