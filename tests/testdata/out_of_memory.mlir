// 8 partitions; its temporary needs 2^35 floats (128 GiB) per device: Linux's overcommit
// heuristic refuses such an allocation, so the execution fails with the plugin's message.
module @oom attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<f32> {mhlo.sharding = "{replicated}"})
      -> (tensor<f32> {mhlo.sharding = "{replicated}"}) {
    %b = stablehlo.broadcast_in_dim %x, dims = [] : (tensor<f32>) -> tensor<34359738368xf32>
    %i = stablehlo.iota dim = 0 : tensor<34359738368xf32>
    %m = stablehlo.add %b, %i : tensor<34359738368xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%m init: %zero) applies stablehlo.maximum across dimensions = [0]
        : (tensor<34359738368xf32>, tensor<f32>) -> tensor<f32>
    return %s : tensor<f32>
  }
}
